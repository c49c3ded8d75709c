import { sql } from 'drizzle-orm';
import { boolean, index, integer, pgTable, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { resourceColumns } from './columns';
import { jobs } from './jobs';
import { organizations } from './organizations';

export const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** The receiver of a per-request `webhook` (spec 4.2), where a console endpoint has its id. */
export const PER_REQUEST_RECEIVER = 'request';

/**
 * One event to one receiver (spec 2.3, 6.3): the event's own `evt_` id, the envelope's exact
 * bytes (identical on every attempt), and the delivery log's fields. The `webhookDelivery`
 * workflow (`whd_<event id>`, the row's id) owns the attempts and writes each outcome here.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    eventId: text('event_id').notNull(),
    eventType: text('event_type').notNull(),
    jobId: text('job_id').references(() => jobs.id, { onDelete: 'cascade' }),
    /** Null for a per-request URL. */
    endpointId: text('endpoint_id'),
    /** The endpoint id, or `request`: one event per receiver of a job's transition. */
    receiver: text('receiver').notNull(),
    url: text('url').notNull(),
    payload: text('payload').notNull(),
    status: text('status', { enum: DELIVERY_STATUSES }).notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    lastResponseStatus: integer('last_response_status'),
    lastError: text('last_error'),
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('webhook_deliveries_event').on(t.eventId),
    // A job's terminal transition queues one event per receiver, however often it is retried.
    uniqueIndex('webhook_deliveries_job_receiver').on(t.jobId, t.receiver),
    index('webhook_deliveries_org_created').on(t.orgId, t.createdAt, t.id),
    // The sweep reads pending deliveries only: those in flight, however large the log.
    index('webhook_deliveries_pending').on(t.id).where(sql`${t.status} = 'pending'`),
  ],
);

export const ALERT_EVENT_TYPES = [
  'spend.anomaly', 'spend.forecast_over_budget', 'cost.drift', 'budget.threshold_crossed', 'connection.failing',
  'unpriced.traffic', 'traffic.model_changed', 'traffic.regression', 'mcp.tool_changed', 'mcp.server_failing',
] as const;
export type AlertEventType = (typeof ALERT_EVENT_TYPES)[number];
/** Spec 2.6 names `min_severity` without its values; these three, in this order. */
export const ALERT_SEVERITIES = ['info', 'warning', 'critical'] as const;
export type AlertSeverity = (typeof ALERT_SEVERITIES)[number];

/**
 * Where alerts go (spec 2.6 notification channels): a console webhook endpoint, a chat app's
 * incoming-webhook address (sealed; reads show only `chatapp_host`), or email addresses.
 */
export const notificationChannels = pgTable(
  'notification_channels',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    kind: text('kind', { enum: ['chatapp', 'webhook', 'email'] }).notNull(),
    label: text('label').notNull(),
    status: text('status', { enum: ['active', 'disabled'] }).notNull().default('active'),
    webhookEndpointId: text('webhook_endpoint_id'),
    chatappUrlSealed: text('chatapp_url_sealed'),
    /** The sealed address's host, the only part of it a read shows. */
    chatappHost: text('chatapp_host'),
    emails: text('emails').array(),
    /**
     * No longer read or written: unsubscribes are the organization's (`email_suppressions`), and
     * migration 0037 copied these there. Kept one release so processes of the previous one still
     * read and write channels during a rolling deploy; a later migration drops it.
     */
    unsubscribedEmails: text('unsubscribed_emails').array().notNull().default([]),
    /** A chat app's 4xx answers in a row: at CHATAPP_REFUSALS_TO_DISABLE the channel is disabled. */
    consecutiveRefusals: integer('consecutive_refusals').notNull().default(0),
    ...resourceColumns(),
  },
  (t) => [index('notification_channels_org').on(t.orgId)],
);

/** A send's slot: held before the send, then what became of it (core/notifications/limits.ts). */
export const NOTIFICATION_SEND_STATES = ['taken', 'sent', 'failed'] as const;

/**
 * Each alert sent to a recipient (an email address, or a chat app address by its hash), so
 * sends are limited per channel and per recipient across organizations: one tenant cannot make
 * the gateway mail or post to anyone at will.
 */
export const notificationSends = pgTable(
  'notification_sends',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    channelId: text('channel_id').notNull(),
    /** The delivery that sent it: a retried attempt skips the recipients it already reached. */
    deliveryId: text('delivery_id'),
    recipient: text('recipient').notNull(),
    /**
     * `taken`: the slot is held for a send about to be made (it counts already, so concurrent
     * deliveries cannot all see room); `sent`: the recipient got it; `failed`: a chat app post
     * went out and was not taken (an error answer, no answer), which still counts.
     */
    state: text('state', { enum: NOTIFICATION_SEND_STATES }).notNull().default('sent'),
    /** When the slot was taken: it counts against the hourly limits for an hour from then. */
    sentAt: timestamp('sent_at', { withTimezone: true }).notNull(),
  },
  (t) => [index('notification_sends_recipient').on(t.recipient, t.sentAt), index('notification_sends_channel').on(t.channelId, t.sentAt), index('notification_sends_delivery').on(t.deliveryId)],
);

/**
 * An address that used the one-click unsubscribe of an alert email: no channel of the
 * organization mails it again, old or new, whatever the channel lists, until the address itself
 * re-subscribes through the link it was given. Keyed by the mailbox (core/notifications/mailbox.ts), so
 * another spelling of the address does not get round it. The management API cannot clear it.
 */
export const emailSuppressions = pgTable(
  'email_suppressions',
  {
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    /** core/notifications/mailbox.ts: lower case, without a `+tag`. */
    address: text('address').notNull(),
    /** The channel whose email carried the link (it may since have been deleted). */
    channelId: text('channel_id'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.orgId, t.address] })],
);

/** Which alert types reach which channel (spec 2.6 notification rules). */
export const notificationRules = pgTable(
  'notification_rules',
  {
    id: text('id').primaryKey(),
    orgId: text('org_id').notNull().references(() => organizations.id, { onDelete: 'cascade' }),
    eventType: text('event_type').notNull(),
    channelId: text('channel_id').notNull().references(() => notificationChannels.id, { onDelete: 'cascade' }),
    minSeverity: text('min_severity', { enum: ALERT_SEVERITIES }).notNull().default('info'),
    scopeKind: text('scope_kind'),
    scopeId: text('scope_id'),
    includeEndUser: boolean('include_end_user').notNull().default(false),
    muteDays: integer('mute_days'),
    mutedUntil: timestamp('muted_until', { withTimezone: true }),
    ...resourceColumns(),
  },
  (t) => [index('notification_rules_org_type').on(t.orgId, t.eventType)],
);
