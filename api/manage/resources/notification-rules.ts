import { and, eq, isNull } from 'drizzle-orm';
import { z } from 'zod';
import type { Executor } from '../../../core/db/client';
import { ALERT_EVENT_TYPES, ALERT_SEVERITIES, gatewayKeys, notificationChannels, notificationRules, projects, providerConnections } from '../../../core/db/schema';
import { GatewayError } from '../../../core/errors';
import { newId } from '../../../core/ids';
import { unixTime } from './fields';
import { newestFirst, selectOne, type ResourceCall, type ResourceType } from './resource-type';
import { unix } from './router';

type RuleRow = typeof notificationRules.$inferSelect;

export const RULE_SCOPE_KINDS = ['project', 'key', 'connection', 'model'] as const;
const MUTE_DAYS = [1, 7, 30] as const;
const DAY_MS = 86_400_000;

const muteDays = z.union(MUTE_DAYS.map((d) => z.literal(d))).nullable()
  .describe('Mutes the rule for 1, 7 or 30 days from now (reads show `muted_until`); null unmutes.');

const createSchema = z.strictObject({
  event_type: z.enum(ALERT_EVENT_TYPES),
  channel_id: z.string().min(1).max(64),
  min_severity: z.enum(ALERT_SEVERITIES).default('info'),
  scope_kind: z.enum(RULE_SCOPE_KINDS).optional(),
  scope_id: z.string().min(1).max(200).optional(),
  include_end_user: z.boolean().default(false),
  mute_days: muteDays.optional(),
}).refine((r) => (r.scope_kind === undefined) === (r.scope_id === undefined), { message: 'give `scope_kind` and `scope_id` together, or neither', path: ['scope_id'] });

const patchSchema = z.strictObject({
  min_severity: z.enum(ALERT_SEVERITIES).optional(),
  include_end_user: z.boolean().optional(),
  mute_days: muteDays.optional(),
});

/** The project, key or connection a rule is scoped to must be the organization's; a model is any name. */
async function checkScope(db: Executor, orgId: string, kind: (typeof RULE_SCOPE_KINDS)[number], id: string): Promise<void> {
  const tables = {
    project: () => db.select({ id: projects.id }).from(projects).where(and(eq(projects.orgId, orgId), eq(projects.id, id))),
    key: () => db.select({ id: gatewayKeys.id }).from(gatewayKeys).where(and(eq(gatewayKeys.orgId, orgId), eq(gatewayKeys.id, id))),
    connection: () => db.select({ id: providerConnections.id }).from(providerConnections)
      .where(and(eq(providerConnections.orgId, orgId), eq(providerConnections.id, id), isNull(providerConnections.deletedAt))),
  };
  if (kind === 'model') return;
  const [found] = await tables[kind]();
  if (!found) throw new GatewayError('invalid_request', `Invalid \`scope_id\`: the organization has no such ${kind}.`);
}

function mutedUntil(call: ResourceCall, days: number | null): Date | null {
  return days === null ? null : new Date(call.now.getTime() + days * DAY_MS);
}

/** Which alert types reach which channel (spec 2.6 notification rules). */
export const notificationRulesResource: ResourceType<RuleRow> = {
  type: 'notification_rules',
  object: 'notification_rule',
  scope: 'alerts',
  table: notificationRules,
  readSchema: z.object({
    event_type: z.enum(ALERT_EVENT_TYPES),
    channel_id: z.string(),
    min_severity: z.enum(ALERT_SEVERITIES),
    scope_kind: z.enum(RULE_SCOPE_KINDS).nullable(),
    scope_id: z.string().nullable(),
    include_end_user: z.boolean(),
    mute_days: z.number().int().nullable(),
    muted_until: unixTime.nullable(),
    created_at: unixTime,
    updated_at: unixTime,
  }),
  createSchema,
  patchSchema,

  async find(db, orgId, id, { forUpdate }) {
    const query = db.select().from(notificationRules).where(and(eq(notificationRules.orgId, orgId), eq(notificationRules.id, id)));
    return selectOne(query, forUpdate);
  },

  list(db, principal, page) {
    return newestFirst(db, notificationRules, eq(notificationRules.orgId, principal.orgId), page);
  },

  async create(call, input: z.infer<typeof createSchema>) {
    const orgId = call.principal.orgId;
    const [channel] = await call.db.select({ id: notificationChannels.id }).from(notificationChannels)
      .where(and(eq(notificationChannels.orgId, orgId), eq(notificationChannels.id, input.channel_id)));
    if (!channel) throw new GatewayError('invalid_request', 'Invalid `channel_id`: the organization has no such notification channel.');
    if (input.scope_kind && input.scope_id) await checkScope(call.db, orgId, input.scope_kind, input.scope_id);
    const [row] = await call.db.insert(notificationRules).values({
      id: newId('nrule'),
      orgId,
      eventType: input.event_type,
      channelId: channel.id,
      minSeverity: input.min_severity,
      scopeKind: input.scope_kind ?? null,
      scopeId: input.scope_id ?? null,
      includeEndUser: input.include_end_user,
      muteDays: input.mute_days ?? null,
      mutedUntil: mutedUntil(call, input.mute_days ?? null),
    }).returning();
    return { row: row! };
  },

  async patch(call, _row, input: z.infer<typeof patchSchema>) {
    return {
      ...(input.min_severity !== undefined && { minSeverity: input.min_severity }),
      ...(input.include_end_user !== undefined && { includeEndUser: input.include_end_user }),
      ...(input.mute_days !== undefined && { muteDays: input.mute_days, mutedUntil: mutedUntil(call, input.mute_days) }),
    };
  },

  async remove() {
    return 'delete';
  },

  present: (row) => ({
    event_type: row.eventType,
    channel_id: row.channelId,
    min_severity: row.minSeverity,
    scope_kind: row.scopeKind,
    scope_id: row.scopeId,
    include_end_user: row.includeEndUser,
    mute_days: row.muteDays,
    muted_until: unix(row.mutedUntil),
    created_at: unix(row.createdAt),
    updated_at: unix(row.updatedAt),
  }),
} as ResourceType<RuleRow>;
