import { and, eq, lt, or, sql } from 'drizzle-orm';
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

/**
 * Runs `perform` at most once per (organization, scope, key) within the replay window and
 * answers every repeat with the first answer. A repeat with another body is refused
 * (`idempotency_key_reuse`), one while the first still runs too (`idempotency_key_in_progress`).
 * A first request that fails stores nothing, so the client may retry with the same key.
 */
export async function withIdempotency(
  db: Database,
  claim: { orgId: string; scope: string; key: string; request: unknown; now: Date },
  perform: () => Promise<FirstAnswer>,
): Promise<StoredAnswer & { replayed: boolean }> {
  validateIdempotencyKey(claim.key);
  const requestHash = sha256Hex(canonical(claim.request));
  const now = claim.now;
  const identity = and(
    eq(idempotencyRecords.orgId, claim.orgId),
    eq(idempotencyRecords.scope, claim.scope),
    eq(idempotencyRecords.key, claim.key),
  );

  // Take the key: insert, or take over a record that expired or whose first request died.
  const taken = await db
    .insert(idempotencyRecords)
    .values({
      orgId: claim.orgId,
      scope: claim.scope,
      key: claim.key,
      requestHash,
      state: 'in_progress',
      lockedUntil: new Date(now.getTime() + IN_PROGRESS_LEASE_MS),
      expiresAt: new Date(now.getTime() + IDEMPOTENCY_REPLAY_MS),
    })
    .onConflictDoUpdate({
      target: [idempotencyRecords.orgId, idempotencyRecords.scope, idempotencyRecords.key],
      set: {
        requestHash,
        state: 'in_progress',
        responseStatus: null,
        responseBody: null,
        lockedUntil: new Date(now.getTime() + IN_PROGRESS_LEASE_MS),
        expiresAt: new Date(now.getTime() + IDEMPOTENCY_REPLAY_MS),
        createdAt: sql`now()`,
      },
      setWhere: or(
        lt(idempotencyRecords.expiresAt, now),
        and(eq(idempotencyRecords.state, 'in_progress'), lt(idempotencyRecords.lockedUntil, now)),
      ),
    })
    .returning({ key: idempotencyRecords.key });

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

  let answer: FirstAnswer;
  try {
    answer = await perform();
  } catch (err) {
    await db.delete(idempotencyRecords).where(identity);
    throw err;
  }
  await db
    .update(idempotencyRecords)
    .set({ state: 'done', responseStatus: answer.status, responseBody: answer.body })
    .where(identity);
  const { reveal, ...stored } = answer;
  return { status: stored.status, body: reveal ? { ...(stored.body as object), ...reveal } : stored.body, replayed: false };
}
