import type { Plan } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { mcpAccessEnabled } from '../../../core/mcp/grants';
import type { PlanGatedWrite, ResourceType } from './resource-type';

/**
 * The tool-gateway gates (spec 4.4): a write that is plan-gated at all (Team or Business) is
 * also refused while the organization has assistant access turned off (`org_settings.mcp_enabled`
 * false: 403 `mcp_disabled`). What is never plan-gated (disabling a server, `disable_all`,
 * blocking a tool, deleting a grant) stays open then too, so access can always be taken away.
 */
export function mcpGate(planFor: (write: PlanGatedWrite) => Plan | null): Pick<ResourceType, 'planFor' | 'gate'> {
  return {
    planFor,
    async gate(db, principal, write) {
      if (planFor(write) === null) return;
      if (!(await mcpAccessEnabled(db, principal.orgId))) {
        throw new GatewayError('mcp_disabled', 'Assistant (tool-gateway) access is turned off for this organization; an owner or admin can turn it on with `org_settings.mcp_enabled`.');
      }
    },
  };
}
