import { and, eq, gt, inArray, isNull, or, sql } from 'drizzle-orm';
import type { Executor } from '../db/client';
import { ALERT_SEVERITIES, notificationChannels, notificationRules, webhookEndpoints, type FindingRow } from '../db/schema';
import { queueEvents, type QueuedDelivery, type Receiver } from '../webhooks/fan-out';
import { presentFinding } from './present';
import { alertEmail, chatappMessage, findingLink } from './messages';

type RuleWithChannel = {
  scopeKind: string | null;
  scopeId: string | null;
  includeEndUser: boolean;
  channel: typeof notificationChannels.$inferSelect;
  endpointUrl: string | null;
};

/** The alert object of spec 6.2: the finding as `GET /findings/{id}` answers it. */
export function alertObject(finding: FindingRow): Record<string, unknown> {
  return Object.assign({ id: finding.id, object: 'finding' }, presentFinding(finding));
}

/**
 * Whether a rule's scope takes in a finding: no scope takes in all; otherwise the finding's own
 * scope, or its subject, names the rule's project, key, connection or model.
 */
export function ruleScopeMatches(rule: Pick<RuleWithChannel, 'scopeKind' | 'scopeId'>, finding: Pick<FindingRow, 'scopeKind' | 'scopeId' | 'subject' | 'evidence'>): boolean {
  if (!rule.scopeKind || !rule.scopeId) return true;
  if (finding.scopeKind === rule.scopeKind && finding.scopeId === rule.scopeId) return true;
  if (rule.scopeKind === 'model') return finding.subject.model === rule.scopeId;
  if (rule.scopeKind === 'connection') return finding.subject.connection === rule.scopeId;
  // A key's finding is its project's too (the detectors name the project in the evidence).
  if (rule.scopeKind === 'project') return finding.scopeKind === 'key' && finding.evidence.project_id === rule.scopeId;
  return false;
}

/**
 * Whether a finding is about one end customer (their spend anomaly, their cap crossed): a rule
 * notifies on those only with `include_end_user` (spec 2.6), since they name the customer.
 */
export function aboutEndUser(finding: Pick<FindingRow, 'scopeKind'>): boolean {
  return finding.scopeKind === 'end_user';
}

/** Where a delivery goes, as the delivery log shows it: never a chat app's sealed address. */
function shownUrl(rule: RuleWithChannel): string | null {
  const { channel } = rule;
  if (channel.kind === 'webhook') return rule.endpointUrl;
  if (channel.kind === 'chatapp') return channel.chatappHost ? `https://${channel.chatappHost}/…` : null;
  return channel.emails && channel.emails.length > 0 ? `mailto:${channel.emails.join(',')}` : null;
}

/**
 * Queues a finding's notification (a new finding, or a raise of its severity) to every active
 * channel whose rule matches its type, scope and `min_severity` and is not muted: one delivery
 * per channel, however many rules lead there. Runs in the transaction that changed the finding,
 * so a retried detection that finds it already changed queues nothing again. Answers the
 * deliveries whose `webhookDelivery` workflows to start once that transaction has committed.
 */
export async function queueFindingNotifications(db: Executor, finding: FindingRow, now: Date, publicUrl: string): Promise<QueuedDelivery[]> {
  const severities = ALERT_SEVERITIES.slice(0, ALERT_SEVERITIES.indexOf(finding.severity) + 1);
  const rules: RuleWithChannel[] = await db.select({
    scopeKind: notificationRules.scopeKind,
    scopeId: notificationRules.scopeId,
    includeEndUser: notificationRules.includeEndUser,
    channel: notificationChannels,
    endpointUrl: webhookEndpoints.url,
  })
    .from(notificationRules)
    .innerJoin(notificationChannels, eq(notificationChannels.id, notificationRules.channelId))
    .leftJoin(webhookEndpoints, and(eq(webhookEndpoints.id, notificationChannels.webhookEndpointId), isNull(webhookEndpoints.deletedAt)))
    .where(and(
      eq(notificationRules.orgId, finding.orgId),
      eq(notificationRules.eventType, finding.type),
      inArray(notificationRules.minSeverity, severities),
      or(isNull(notificationRules.mutedUntil), gt(sql`${now.toISOString()}::timestamptz`, notificationRules.mutedUntil)),
      eq(notificationChannels.orgId, finding.orgId),
      eq(notificationChannels.status, 'active'),
    ));
  const byChannel = new Map<string, RuleWithChannel>();
  const endUser = aboutEndUser(finding);
  for (const rule of rules) if ((!endUser || rule.includeEndUser) && ruleScopeMatches(rule, finding) && shownUrl(rule)) byChannel.set(rule.channel.id, rule);
  if (byChannel.size === 0) return [];

  const link = findingLink(publicUrl, finding);
  // Webhook channels get the signed event envelope; chat apps and email a body of their own.
  const receivers: Receiver[] = [...byChannel.values()].map((rule) => ({
    receiver: rule.channel.id,
    endpointId: rule.channel.kind === 'webhook' ? rule.channel.webhookEndpointId : null,
    url: shownUrl(rule)!,
    body: rule.channel.kind === 'chatapp' ? JSON.stringify(chatappMessage(finding, link))
      : rule.channel.kind === 'email' ? JSON.stringify(Object.assign({ to: rule.channel.emails }, alertEmail(finding, link)))
        : undefined,
  }));
  return queueEvents(db, { orgId: finding.orgId, type: finding.type, data: alertObject(finding), jobId: null, now }, receivers);
}
