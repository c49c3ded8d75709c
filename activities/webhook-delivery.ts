import { ApplicationFailure } from '@temporalio/activity';
import { ApplicationFailureCategory } from '@temporalio/common';
import { and, eq, sql } from 'drizzle-orm';
import type { Dispatcher } from 'undici';
import type { Clock } from '../core/clock';
import type { Sealer, SigningKeys } from '../core/crypto/sealing';
import type { Database } from '../core/db/client';
import { notificationChannels, webhookDeliveries, type DeliveryStatus } from '../core/db/schema';
import type { Mailer, MailMessage } from '../core/notifications/mailer';
import { sendWebhook, type SendOutcome } from '../core/webhooks/send';
import { appendAudit } from '../core/audit';
import { CHATAPP_REFUSALS_TO_DISABLE, chatappRecipient, emailRecipient, settleSendSlots, takeSendSlots } from '../core/notifications/limits';
import { mailbox } from '../core/notifications/mailbox';
import { suppressedAmong } from '../core/notifications/suppressions';
import { unsubscribeHeaders } from '../core/notifications/unsubscribe';
import { signatureHeader } from '../core/webhooks/signature';
import { signingSecrets } from '../core/webhooks/signing-secrets';
import { unixSeconds } from '../core/clock';

export type WebhookDeliveryDeps = {
  db: Database; clock: Clock; sealer: Sealer; dispatcher: Dispatcher; mailer: Mailer;
  /** Where an alert email's one-click unsubscribe link points (the API's public address), and the key its tokens are signed with. */
  unsubscribe: { publicUrl: string; key: SigningKeys };
};

type Delivery = typeof webhookDeliveries.$inferSelect;

/** A chat app's answers that mean its address no longer takes messages (revoked, removed). */
const REFUSED_FOR_GOOD: ReadonlySet<number> = new Set([400, 401, 403, 404, 410]);

/** A notification channel's delivery (issue 22) names the channel as its receiver. */
const CHANNEL_RECEIVER = /^nch_/;

/** An attempt's place in the schedule: its number, and the wait before the next (null: last). */
export type AttemptInput = { deliveryId: string; attempt: number; nextAttemptInMs: number | null };
export type AttemptResult = { status: DeliveryStatus };

/** A retry this close to its attempt's planned time makes the attempt. */
const ON_TIME_MS = 20;

/** `deliver`'s retryable failure between two attempts; the Temporal UI shows it as the activity's last failure. */
export const DELIVERY_ATTEMPT_FAILED = 'DeliveryAttemptFailed';

export function createWebhookDeliveryActivities(deps: WebhookDeliveryDeps) {
  /**
   * Writes an attempt's outcome: succeeded, or pending with the next attempt's time, or failed
   * after the last. Only a pending delivery moves, so at most one success is ever recorded.
   */
  async function recordOutcome(input: AttemptInput, outcome: { ok: boolean; status: number | null; error: string | null }): Promise<AttemptResult> {
    const now = deps.clock.now();
    const status: DeliveryStatus = outcome.ok ? 'succeeded' : input.nextAttemptInMs === null ? 'failed' : 'pending';
    const [row] = await deps.db.update(webhookDeliveries).set({
      status,
      attempts: sql`greatest(${webhookDeliveries.attempts}, ${input.attempt})`,
      lastResponseStatus: outcome.status,
      lastError: outcome.error,
      nextAttemptAt: status === 'pending' ? new Date(now.getTime() + input.nextAttemptInMs!) : null,
      updatedAt: now,
    }).where(and(eq(webhookDeliveries.id, input.deliveryId), eq(webhookDeliveries.status, 'pending'))).returning({ status: webhookDeliveries.status });
    if (row) return { status: row.status };
    const [current] = await deps.db.select({ status: webhookDeliveries.status }).from(webhookDeliveries).where(eq(webhookDeliveries.id, input.deliveryId));
    return { status: current?.status ?? 'failed' };
  }

  /**
   * An alert to a chat app or by email: the channel is read at each attempt, so a changed
   * address or a deleted channel counts from then on. The chat address is opened only here.
   */
  async function sendToChannel(delivery: Delivery): Promise<SendOutcome | null> {
    const [channel] = await deps.db.select().from(notificationChannels)
      .where(and(eq(notificationChannels.orgId, delivery.orgId), eq(notificationChannels.id, delivery.receiver)));
    if (!channel) return null;
    if (channel.status !== 'active') return { ok: false, status: null, error: 'the notification channel is disabled' };
    const now = deps.clock.now();
    if (channel.kind === 'chatapp' && channel.chatappUrlSealed) {
      const url = deps.sealer.open(channel.chatappUrlSealed, { orgId: channel.orgId, recordId: channel.id, field: 'chatapp_url' });
      const slots = await takeSendSlots(deps.db, { orgId: channel.orgId, channelId: channel.id, deliveryId: delivery.id, recipients: [chatappRecipient(url)], now });
      // An earlier attempt posted it and was lost before it recorded so.
      if (slots.reached.length > 0) return { ok: true, status: null, error: null };
      const [slot] = slots.taken;
      if (!slot) return { ok: false, status: null, error: slots.channelFull ? 'the channel reached its alerts for this hour' : 'the chat app address reached its alerts for this hour' };
      const sent = await sendWebhook(deps.dispatcher, { url, payload: delivery.payload, headers: {} });
      // A refused post still reached the address's server: it counts, and the next attempt posts again.
      await settleSendSlots(deps.db, [{ id: slot.id, outcome: sent.ok ? 'sent' : 'failed' }]);
      await countChatappAnswer(channel, sent);
      return sent;
    }
    if (channel.kind === 'email') {
      const message = JSON.parse(delivery.payload) as MailMessage;
      // One email per mailbox; two spellings of one mailbox (case, a `+tag`) are one recipient.
      const byRecipient = new Map((channel.emails ?? message.to).map((e) => [emailRecipient(e), e] as const));
      // Unsubscribed from the organization (any channel's link): never mailed, whichever channel lists it.
      const suppressed = await suppressedAmong(deps.db, channel.orgId, [...byRecipient.values()]);
      const addresses = [...byRecipient.values()].filter((e) => !suppressed.has(mailbox(e)));
      if (addresses.length === 0) return { ok: true, status: null, error: null };
      // The slots are taken before sending; an address this delivery already reached (an earlier attempt that failed for another) is not mailed again.
      const slots = await takeSendSlots(deps.db, { orgId: channel.orgId, channelId: channel.id, deliveryId: delivery.id, recipients: addresses.map(emailRecipient), now });
      const waiting = addresses.length - slots.reached.length - slots.taken.length;
      const outcomes: SendOutcome[] = [];
      for (const slot of slots.taken) {
        const to = byRecipient.get(slot.recipient)!;
        const headers = unsubscribeHeaders(deps.unsubscribe.publicUrl, deps.unsubscribe.key, { orgId: channel.orgId, channelId: channel.id, email: to });
        const sent = await deps.mailer(Object.assign({}, message, { to: [to], headers }));
        // A mail the server did not take went nowhere: its slot is given back.
        await settleSendSlots(deps.db, [{ id: slot.id, outcome: sent.ok ? 'sent' : 'released' }]);
        outcomes.push(sent);
      }
      const failed = outcomes.find((o) => !o.ok);
      if (failed) return failed;
      // Those over a limit wait for the next attempt, which skips the addresses reached.
      if (waiting > 0) {
        const who = waiting === addresses.length ? 'every recipient reached its' : `${waiting} of ${addresses.length} recipients reached their`;
        return { ok: false, status: null, error: slots.channelFull ? 'the channel reached its alerts for this hour' : `${who} alerts for this hour` };
      }
      return outcomes[0] ?? { ok: true, status: null, error: null };
    }
    return { ok: false, status: null, error: `a ${channel.kind} channel has nowhere to send` };
  }

  /**
   * A chat app address that keeps refusing (4xx: revoked, not found) is disabled after a few
   * refusals in a row, with an audit event; an answer that is not a refusal starts the count over.
   */
  async function countChatappAnswer(channel: typeof notificationChannels.$inferSelect, sent: SendOutcome): Promise<void> {
    // The answers that say the address is gone for good; a 429 or a 408 is a busy moment.
    const refused = sent.status !== null && REFUSED_FOR_GOOD.has(sent.status);
    if (!refused) {
      if (channel.consecutiveRefusals > 0) await deps.db.update(notificationChannels).set({ consecutiveRefusals: 0 }).where(eq(notificationChannels.id, channel.id));
      return;
    }
    await deps.db.transaction(async (tx) => {
      const [counted] = await tx.update(notificationChannels).set({ consecutiveRefusals: sql`${notificationChannels.consecutiveRefusals} + 1` })
        .where(eq(notificationChannels.id, channel.id)).returning();
      if (!counted || counted.status !== 'active' || counted.consecutiveRefusals < CHATAPP_REFUSALS_TO_DISABLE) return;
      const [disabled] = await tx.update(notificationChannels).set({ status: 'disabled', version: sql`${notificationChannels.version} + 1`, updatedAt: deps.clock.now() })
        .where(and(eq(notificationChannels.id, channel.id), eq(notificationChannels.status, 'active'))).returning();
      if (!disabled) return;
      await appendAudit(tx, {
        orgId: channel.orgId, actor: { tokenId: null, memberId: null }, action: 'notification_channels.disabled', resourceType: 'notification_channels', resourceId: channel.id,
        beforeVersion: counted.version, afterVersion: disabled.version, detail: { reason: 'the chat app address refused alerts', refusals: counted.consecutiveRefusals, last_status: sent.status },
      });
    });
  }

  /** An attempt's outcome recorded, with what it met (for `deliver`'s message). */
  async function recorded(input: AttemptInput, outcome: { ok: boolean; status: number | null; error: string | null }): Promise<AttemptResult & { met: string }> {
    const result = await recordOutcome(input, outcome);
    return { ...result, met: outcome.status !== null ? `HTTP ${outcome.status}` : outcome.error ?? 'no answer' };
  }

  /** One attempt (spec 6.3), as `attemptDelivery` below describes it. */
  async function attempt(input: AttemptInput): Promise<AttemptResult & { met?: string }> {
    const [delivery] = await deps.db.update(webhookDeliveries)
      .set({ attempts: sql`greatest(${webhookDeliveries.attempts}, ${input.attempt})`, nextAttemptAt: null, updatedAt: deps.clock.now() })
      .where(and(eq(webhookDeliveries.id, input.deliveryId), eq(webhookDeliveries.status, 'pending')))
      .returning();
    if (!delivery) {
      const [current] = await deps.db.select({ status: webhookDeliveries.status }).from(webhookDeliveries).where(eq(webhookDeliveries.id, input.deliveryId));
      return { status: current?.status ?? 'failed' };
    }
    if (CHANNEL_RECEIVER.test(delivery.receiver) && delivery.endpointId === null) {
      const sent = await sendToChannel(delivery);
      if (sent === null) return recorded({ ...input, nextAttemptInMs: null }, { ok: false, status: null, error: 'the notification channel was deleted' });
      return recorded(input, sent);
    }
    const now = deps.clock.now();
    const secrets = await signingSecrets(deps.db, deps.sealer, delivery, now);
    if (secrets === null) return recorded({ ...input, nextAttemptInMs: null }, { ok: false, status: null, error: 'the endpoint was deleted' });
    const headers: Record<string, string> = { 'gw-event-id': delivery.eventId };
    if (secrets.length > 0) headers['gw-signature'] = signatureHeader(delivery.payload, secrets, unixSeconds(now));
    const outcome = await sendWebhook(deps.dispatcher, { url: delivery.url, payload: delivery.payload, headers });
    return recorded(input, outcome);
  }

  /** Thrown between two attempts: the retry policy makes the next one after `waitMs`. */
  function nextAttemptIn(waitMs: number, message: string, details: Record<string, unknown>): never {
    // BENIGN: the SDK logs it at DEBUG; the delivery row and the UI's last failure say what happened.
    throw ApplicationFailure.create({ type: DELIVERY_ATTEMPT_FAILED, message, nextRetryDelay: Math.max(1, waitMs), details: [details], category: ApplicationFailureCategory.BENIGN });
  }

  return {
    /**
     * The whole delivery as one activity: each attempt of the activity is one attempt of the
     * schedule, and between two the activity fails with `nextRetryDelay` set to the schedule's
     * wait, so the Temporal server keeps the schedule and the workflow wakes only for the outcome
     * (a 12-attempt failing delivery writes about a dozen history events). The delivery row is
     * the count: an attempt is counted before its POST, so one cut short by a lost worker or a
     * timeout still counts; the retry that follows records it as lost and waits out the rest of
     * its planned gap. A retry that comes early (the policy's own backoff) waits too, without an attempt.
     */
    async deliver(input: { deliveryId: string; attemptDelaysMs: number[] }): Promise<AttemptResult> {
      const [row] = await deps.db.select({ status: webhookDeliveries.status, attempts: webhookDeliveries.attempts, nextAttemptAt: webhookDeliveries.nextAttemptAt, updatedAt: webhookDeliveries.updatedAt })
        .from(webhookDeliveries).where(eq(webhookDeliveries.id, input.deliveryId));
      if (!row) return { status: 'failed' };
      if (row.status !== 'pending') return { status: row.status };
      const planned = input.attemptDelaysMs.length;
      const now = deps.clock.now().getTime();
      let nextAt = row.nextAttemptAt?.getTime() ?? null;
      if (row.attempts > 0 && nextAt === null) {
        // The previous attempt started (it is counted) and never recorded its outcome.
        const lost = { deliveryId: input.deliveryId, attempt: row.attempts, nextAttemptInMs: input.attemptDelaysMs[row.attempts] ?? null };
        const outcome = await recordOutcome({ ...lost, nextAttemptInMs: lost.nextAttemptInMs === null ? null : Math.max(0, row.updatedAt.getTime() + lost.nextAttemptInMs - now) },
          { ok: false, status: null, error: 'the attempt did not finish (its worker was lost or it timed out)' });
        if (outcome.status !== 'pending') return outcome;
        nextAt = row.updatedAt.getTime() + lost.nextAttemptInMs!;
      }
      // Timers fire a little early or late; an attempt this close to its time is made now.
      if (nextAt !== null && nextAt - now > ON_TIME_MS) nextAttemptIn(nextAt - now, `waiting for attempt ${row.attempts + 1} of ${planned}`, { attempts: row.attempts });
      const number = row.attempts + 1;
      const result = await attempt({ deliveryId: input.deliveryId, attempt: number, nextAttemptInMs: input.attemptDelaysMs[number] ?? null });
      if (result.status !== 'pending') return { status: result.status };
      const wait = input.attemptDelaysMs[number]!;
      return nextAttemptIn(wait, `attempt ${number} of ${planned} failed (${result.met ?? 'no answer'}); attempt ${number + 1} in ${wait} ms`, { attempts: number });
    },

    /**
     * One attempt (spec 6.3): the stored bytes, signed afresh with the secrets signing now, POSTed
     * once; this activity never retries, the workflow owns the schedule. The attempt is counted
     * before the POST, so an attempt cut short by a crash still counts.
     */
    async attemptDelivery(input: AttemptInput): Promise<AttemptResult> {
      return { status: (await attempt(input)).status };
    },

    /** An attempt whose activity never reported (its worker died, it timed out) counts as failed. */
    async recordLostAttempt(input: AttemptInput & { reason: string }): Promise<AttemptResult> {
      return recordOutcome(input, { ok: false, status: null, error: `the attempt did not finish: ${input.reason}`.slice(0, 300) });
    },
  };
}

export type WebhookDeliveryActivities = ReturnType<typeof createWebhookDeliveryActivities>;
