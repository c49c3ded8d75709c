import { randomUUID } from 'node:crypto';
import { and, eq, isNull, lt, or, sql } from 'drizzle-orm';
import type { Database } from './db/client';
import { idempotencyRecords } from './db/schema';
import { sha256Hex } from './crypto/secrets';
import { GatewayError } from './errors';

export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;
export const IDEMPOTENCY_REPLAY_MS = 24 * 60 * 60 * 1000;
/** How long a first request may run before a crashed one stops blocking its key. */
const IN_PROGRESS_LEASE_MS = 60_000;

export type StoredAnswer = { status: number; body: unknown };

/**
 * What `perform` answers: `reveal` holds fields shown only in this first answer (a key or
 * signing secret). They are never stored, so a replay answers without them: a secret is shown
 * once, and the idempotency table never holds one.
 */
export type FirstAnswer = StoredAnswer & { reveal?: Record<string, unknown> };

/** Stable JSON: the same body with keys in another order is the same request. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function validateIdempotencyKey(key: string): void {
  if (key.length === 0 || key.length > IDEMPOTENCY_KEY_MAX_LENGTH) {
    throw new GatewayError('invalid_request', `Idempotency-Key must be 1 to ${IDEMPOTENCY_KEY_MAX_LENGTH} characters.`);
  }
}

/** What a request may have started, recorded before it starts it: `{ job_id: ... }`. */
export type Checkpoint = Record<string, unknown>;

/** The first request's hold on its key, handed to `perform`. */
export type IdempotencyClaim = {
  /**
   * Records what the request is about to start, before starting it. From then on a failure
   * keeps the record, and a retry resolves to this reference (`resume`) instead of running
   * `perform` again. Throws `idempotency_key_in_progress` when the request ran past its lease
   * and another took the key over: the caller must then start nothing.
   */
  checkpoint(ref: Checkpoint): Promise<void>;
};

const lostKey = () =>
  new GatewayError('idempotency_key_in_progress', 'This request ran past its lease and a retry with the same Idempotency-Key took it over.');

/**
 * Runs `perform` at most once per (organization, scope, key) within the replay window and
 * answers every repeat with the first answer. A repeat with another body is refused
 * (`idempotency_key_reuse`), one while the first still runs too (`idempotency_key_in_progress`).
 *
 * Each claim of the key writes a fresh `claim_token`, and every later write of the request
 * (checkpoint, final answer, release) matches that token: a request slower than the lease
 * whose record a retry took over cannot overwrite the new owner's record.
 *
 * A first request that fails before any checkpoint deletes its record (nothing was started), so
 * the client may retry with the same key. One that fails after its checkpoint, or dies, leaves
 * the record with the checkpoint; the retry that takes it over calls `resume(checkpoint)` in
 * place of `perform`, which answers from what was started (the job, not a second one).
 */
export async function withIdempotency(
  db: Database,
  claim: { orgId: string; scope: string; key: string; request: unknown; now: Date },
  perform: (claim: IdempotencyClaim) => Promise<FirstAnswer>,
  resume?: (checkpoint: Checkpoint) => Promise<FirstAnswer>,
): Promise<StoredAnswer & { replayed: boolean }> {
  validateIdempotencyKey(claim.key);
  const requestHash = sha256Hex(canonical(claim.request));
  const now = claim.now;
  const token = randomUUID();
  const identity = and(
    eq(idempotencyRecords.orgId, claim.orgId),
    eq(idempotencyRecords.scope, claim.scope),
    eq(idempotencyRecords.key, claim.key),
  );
  const mine = and(identity, eq(idempotencyRecords.claimToken, token));

  // Take the key: insert, or take over a record that expired, failed, or whose first request
  // outlived its lease. A checkpoint survives a takeover by the same request (not an expired one).
  const taken = await db
    .insert(idempotencyRecords)
    .values({
      orgId: claim.orgId,
      scope: claim.scope,
      key: claim.key,
      requestHash,
      state: 'in_progress',
      claimToken: token,
      lockedUntil: new Date(now.getTime() + IN_PROGRESS_LEASE_MS),
      expiresAt: new Date(now.getTime() + IDEMPOTENCY_REPLAY_MS),
    })
    .onConflictDoUpdate({
      target: [idempotencyRecords.orgId, idempotencyRecords.scope, idempotencyRecords.key],
      set: {
        requestHash,
        state: 'in_progress',
        claimToken: token,
        checkpoint: sql`case when ${idempotencyRecords.expiresAt} < ${now.toISOString()}::timestamptz then null else ${idempotencyRecords.checkpoint} end`,
        responseStatus: null,
        responseBody: null,
        lockedUntil: new Date(now.getTime() + IN_PROGRESS_LEASE_MS),
        expiresAt: new Date(now.getTime() + IDEMPOTENCY_REPLAY_MS),
        createdAt: sql`now()`,
      },
      setWhere: or(
        lt(idempotencyRecords.expiresAt, now),
        and(
          or(eq(idempotencyRecords.state, 'failed'), and(eq(idempotencyRecords.state, 'in_progress'), lt(idempotencyRecords.lockedUntil, now))),
          // Another body never resumes what this key's first request started.
          or(isNull(idempotencyRecords.checkpoint), eq(idempotencyRecords.requestHash, requestHash)),
        ),
      ),
    })
    .returning({ checkpoint: idempotencyRecords.checkpoint });

  if (taken.length === 0) {
    const [existing] = await db.select().from(idempotencyRecords).where(identity);
    if (!existing) throw new GatewayError('idempotency_key_in_progress', 'A request with this Idempotency-Key is still being processed.');
    if (existing.requestHash !== requestHash) {
      throw new GatewayError('idempotency_key_reuse', 'This Idempotency-Key was used with a different request.');
    }
    if (existing.state !== 'done') {
      throw new GatewayError('idempotency_key_in_progress', 'A request with this Idempotency-Key is still being processed.');
    }
    return { status: existing.responseStatus!, body: existing.responseBody, replayed: true };
  }

  const found = (taken[0]!.checkpoint ?? null) as Checkpoint | null;
  let checkpointed = found !== null;
  const handle: IdempotencyClaim = {
    async checkpoint(ref) {
      const written = await db.update(idempotencyRecords).set({ checkpoint: ref }).where(mine).returning({ key: idempotencyRecords.key });
      if (written.length === 0) throw lostKey();
      checkpointed = true;
    },
  };

  let answer: FirstAnswer;
  try {
    if (found) {
      if (!resume) throw new GatewayError('internal_error', `Idempotency scope ${claim.scope} checkpointed without a way to resume.`);
      answer = await resume(found);
    } else {
      answer = await perform(handle);
    }
  } catch (err) {
    // Before a checkpoint nothing was started: free the key. After one, keep what was started
    // for the retry. Either only while the record is still ours.
    if (checkpointed) await db.update(idempotencyRecords).set({ state: 'failed' }).where(mine);
    else await db.delete(idempotencyRecords).where(mine);
    throw err;
  }
  // A request that outlived its lease and lost the record does not overwrite the new owner's
  // answer; it still answers its own (its work did happen, and a checkpointed one resolved the
  // retry to the same resource).
  await db
    .update(idempotencyRecords)
    .set({ state: 'done', responseStatus: answer.status, responseBody: answer.body })
    .where(mine);
  const { reveal, ...stored } = answer;
  return { status: stored.status, body: reveal ? { ...(stored.body as object), ...reveal } : stored.body, replayed: false };
}
