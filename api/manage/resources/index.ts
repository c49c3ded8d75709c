import { commitmentsResource } from './commitments';
import { costCenterRulesResource } from './cost-center-rules';
import { costCentersResource } from './cost-centers';
import { decisionPoliciesResource } from './decision-policies';
import { endUserCapRulesResource } from './end-user-cap-rules';
import { findingsResource } from './findings';
import { gatewayKeysResource } from './gateway-keys';
import { guardrailPoliciesResource } from './guardrail-policies';
import { mcpKeyGrantsResource } from './mcp-key-grants';
import { mcpServerToolsResource } from './mcp-server-tools';
import { mcpServersResource } from './mcp-servers';
import { memberBudgetsResource } from './member-budgets';
import { modelPricesResource } from './model-prices';
import { notificationChannelsResource } from './notification-channels';
import { notificationRulesResource } from './notification-rules';
import { orgSettingsResource } from './org-settings';
import { projectsResource } from './projects';
import { providerConnectionsResource } from './provider-connections';
import type { ResourceType } from './resource-type';
import { routesResource } from './routes';
import { webhookEndpointsResource } from './webhook-endpoints';

/** Every resource type the generic operations serve, and so every one the OpenAPI document lists. */
export const RESOURCES = [
  projectsResource,
  gatewayKeysResource,
  providerConnectionsResource,
  routesResource,
  orgSettingsResource,
  memberBudgetsResource,
  modelPricesResource,
  webhookEndpointsResource,
  endUserCapRulesResource,
  guardrailPoliciesResource,
  mcpServersResource,
  mcpServerToolsResource,
  mcpKeyGrantsResource,
  notificationChannelsResource,
  notificationRulesResource,
  findingsResource,
  costCentersResource,
  costCenterRulesResource,
  commitmentsResource,
  decisionPoliciesResource,
] as unknown as readonly ResourceType[];
