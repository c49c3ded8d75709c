import { and, eq, gte, isNotNull, sql, type SQL } from 'drizzle-orm';
import type { Database } from '../db/client';
import type { BatchWriter } from '../db/batch-writer';
import { spendLedger, type budgetCrossings } from '../db/schema';
import { newId } from '../ids';
import { GatewayError } from '../errors';
import type { RedisHandle } from '../redis';
import { holdSpend, renewHold, repairWindow, settleHold, sweepLapsedHolds, unregisterHold, settleHoldUnlessMissing, settledNanos, windowKeys, type KeptHold, type RateCount, type RateWindow } from './holds';
import { decimalToNanos, sumNanos, toDollars, toNanos } from './money';
import type { SpendScope } from './scopes';
import type { LeaseDraw } from './leases';
import { createSingleFlight } from '../single-flight';

/** How long a chat request's hold lives if its instance dies before settling it. */
export const CHAT_HOLD_LEASE_MS = 15 * 60_000;
/** A stream still running renews its hold this often, well inside the lease. */
export const CHAT_HOLD_RENEW_MS = 5 * 60_000;

export type SpendLedgerRow = typeof spendLedger.$inferInsert;
export type BudgetCrossingRow = typeof budgetCrossings.$inferInsert;

export type ReserveInput = {
  holdId: string; scopes: SpendScope[]; amount: number; leaseMs: number; now: Date;
  /** A chat call's ledger row (without amount and state): written at the hold's amount if the hold lapses unsettled. */
  lapseRow?: Omit<SpendLedgerRow, 'amount' | 'state'>;
  /** A synchronous model call's: it may draw from this process's lease (core/spend/leases.ts) instead of holding exactly. */
  leasable?: boolean;
};

/** A reservation in flight: what to settle or release. */
export type Hold = {
  id: string; scopes: SpendScope[]; amount: number;
  /** Registered to be recorded if it lapses (a chat hold holding money): its end unregisters it. */
  registered?: boolean;
  /** The ledger row id a lapse would be recorded under: a settle writes the same id, so one of the two rows is kept. */
  rowId?: string;
  /** Drawn from this process's lease: it ends locally, and its cost reaches Redis with the lease's next step. */
  lease?: LeaseDraw;
};

export type SpendLedger = {
  /**
   * Holds `amount` dollars in every scope in one atomic Redis step, or refuses with the 402 of
   * the first blocking scope without room (nothing is held anywhere then). Counters lost with
   * Redis are rebuilt from the Postgres ledger first. With Redis unreachable and a blocking
   * scope, 503: spend is never served unmetered.
   */
  reserve(input: ReserveInput): Promise<Hold>;
  /**
   * The same, counting the request in its key's rate window in the same round trip first
   * (`counted` hears the count before anything else happens); null when the count is past the
   * tier, and then nothing is held.
   */
  reserveCounted(input: ReserveInput & { rate: RateWindow; counted(rate: RateCount): void }): Promise<Hold | null>;
  /** The actual cost replaces the hold in every scope; a chat request's row goes to the ledger. */
  settle(hold: Hold, cost: number, row?: Omit<SpendLedgerRow, 'amount' | 'state'>): Promise<void>;
  /** Gives the hold back (provider error, client gone, unpriced answer). */
  release(hold: Hold): Promise<void>;
  /** Moves a live hold's lease forward: work still running keeps its room. */
  renew(hold: Hold, leaseMs: number, now: Date): Promise<void>;
  /** Settled dollars of each scope's current window, with everything this process has settled. */
  spent(scopes: SpendScope[]): Promise<number[]>;
  /** Brings what this process has settled in the organization to the shared counters (spend leases). */
  flush(orgId: string): Promise<void>;
};


function refusal(scope: SpendScope, amount: number, extra: Record<string, unknown> = {}): GatewayError {
  const what = scope.kind === 'key' ? `This key's ${scope.period === 'never' ? 'lifetime' : scope.period} spend limit`
    : scope.kind === 'project' ? 'The project\'s monthly spend limit'
      : scope.kind === 'member' ? 'The monthly budget of the member who created this key'
        : scope.kind === 'organization' ? 'The organization\'s monthly spend cap'
          : 'This end customer\'s spend cap';
  return new GatewayError(scope.code, `${what} of $${scope.limit} has no room for this request (up to $${amount}).`, { details: extra });
}

/**
 * The `alert_at` fractions a settle carried a scope across: from below to at or above
 * `fraction × limit`. Each is recorded once per scope and window (a unique index keeps a
 * fraction crossed by two instances at once to one row).
 */
export function crossedFractions(scope: Pick<SpendScope, 'alertAt' | 'limit'>, beforeNanos: number, afterNanos: number): number[] {
  if (scope.limit === null || scope.alertAt.length === 0) return [];
  return scope.alertAt.filter((f) => {
    const threshold = toNanos(f * scope.limit!);
    return beforeNanos < threshold && afterNanos >= threshold;
  });
}

/** What a scope must carry for its crossings to be known: also stored with a job's hold. */
export type CrossingScope = Pick<SpendScope, 'orgId' | 'scope' | 'window' | 'limit' | 'alertAt' | 'behavior'>;

/**
 * The crossing rows a settle of `nanos` produced, given each window's total after it. A settle of
 * several costs at once (a lease's step) names them in order: a crossing then records the total
 * as it was after the cost that crossed.
 */
export function crossingRows(scopes: CrossingScope[], totals: Array<number | null>, nanos: number, now: Date, costs: readonly number[] = [nanos]): BudgetCrossingRow[] {
  if (nanos <= 0) return [];
  return scopes.flatMap((scope, i) => {
    const after = totals[i];
    if (after === null || after === undefined) return [];
    const rows: BudgetCrossingRow[] = [];
    let running = after - nanos;
    for (const cost of costs) {
      const before = running;
      running += cost;
      for (const fraction of crossedFractions(scope, before, running)) {
        rows.push({
          id: newId('bcross'), orgId: scope.orgId, scope: scope.scope, window: scope.window, fraction, limit: scope.limit!,
          spent: toDollars(running), behavior: scope.behavior, crossedAt: now,
        });
      }
    }
    return rows;
  });
}

/**
 * The settled ledger rows matching `where` (a condition on `spend_ledger`'s columns), each with
 * the amount it counts (`counted`), its `created_at`, `provider` and `model`. A lapsed spend lease (its process died)
 * was recorded at its full amount, which covers the requests that settled under its last step
 * (the rows of the same `lease_ref`); those that landed count in full, and the lapse only for
 * what they leave of it: together the larger of the lapse and their sum (a crash can
 * over-count, never under-count). Every reader of spend totals sums this, never the rows.
 */
export function countedLedgerRows(where: SQL): SQL {
  return sql`(select spend_ledger.created_at, spend_ledger.provider, spend_ledger.model, case when spend_ledger.request_id like 'lease:%' and spend_ledger.lease_ref is not null
      then greatest(0, spend_ledger.amount - coalesce(covered.amount, 0)) else spend_ledger.amount end as counted
    from spend_ledger left join (
      select lease_ref, sum(amount) as amount from spend_ledger
      where ${where} and state = 'settled' and request_id not like 'lease:%' and lease_ref is not null group by lease_ref
    ) as covered on covered.lease_ref = spend_ledger.lease_ref and spend_ledger.request_id like 'lease:%'
    where ${where} and spend_ledger.state = 'settled')`;
}

/** A window's settled total as the ledger records it (rows still queued for Postgres excepted), each row counted once (countedLedgerRows). */
export async function ledgerWindowTotal(db: Database, scope: Pick<SpendScope, 'orgId' | 'ledger' | 'windowStart'>, excludeLeaseRefs: readonly string[] = []): Promise<bigint> {
  const inWindow = and(
    eq(spendLedger.orgId, scope.orgId),
    sql`${sql.identifier(scope.ledger.column)} = ${scope.ledger.value}`,
    gte(spendLedger.createdAt, scope.windowStart),
    excludeLeaseRefs.length === 0 ? undefined : sql`(${spendLedger.leaseRef} is null or ${spendLedger.leaseRef} not in (${sql.join(excludeLeaseRefs.map((ref) => sql`${ref}`), sql`, `)}))`,
  )!;
  const [row] = await db.select({ total: sql<string>`coalesce(sum(counted), 0)::text` }).from(sql`${countedLedgerRows(inWindow)} as rows`);
  return decimalToNanos(row?.total ?? '0');
}

/** A job's hold lives this long if nothing ends it: past the longest a render is tracked. */
export const JOB_HOLD_LEASE_MS = 12 * 60 * 60_000;

/**
 * The holds of running jobs in a window, from their reserved ledger rows (which record the
 * windows they were held in): what a lost window must hold again, or the ceiling would rise.
 */
export async function runningJobHolds(db: Database, scope: Pick<SpendScope, 'orgId' | 'scope' | 'window'>, now: Date): Promise<KeptHold[]> {
  const rows = await db.select({ jobId: spendLedger.jobId, amount: spendLedger.amount, createdAt: spendLedger.createdAt, windows: spendLedger.holdWindows }).from(spendLedger).where(and(
    eq(spendLedger.orgId, scope.orgId),
    eq(spendLedger.state, 'reserved'),
    isNotNull(spendLedger.jobId),
    sql`${spendLedger.holdWindows} @> ${JSON.stringify([{ scope: scope.scope, window: scope.window }])}::jsonb`,
  ));
  // Only a job under a blocking scope was held in Redis (reserveJobSpend).
  return rows
    .filter((r) => r.windows?.some((w) => w.limitNanos !== null))
    .map((r) => ({ id: r.jobId!, nanos: toNanos(Number(r.amount)), expiresAt: r.createdAt.getTime() + JOB_HOLD_LEASE_MS }))
    .filter((h) => h.expiresAt > now.getTime());
}

/**
 * What keeps the Redis counters honest, shared by requests' holds and processes' leases:
 * crossings recorded, lost windows repaired from Postgres, lapsed holds settled and recorded.
 */
export type SpendUpkeep = {
  recordCrossings(scopes: CrossingScope[], totals: Array<number | null>, nanos: number, costs?: readonly number[]): void;
  /**
   * Lost windows repaired from Postgres: the settled total, and the holds of running jobs
   * (core/spend/holds.ts). `excludeLeaseRefs`: a lease's step leaves out the rows settled under
   * the step it flushes and the one after (settled while it is in flight): their spend is added
   * by this step and the next, and their rows may have landed before the rebuild.
   */
  seedMissing(scopes: SpendScope[], options?: { excludeLeaseRefs?: string[] }): Promise<void>;
  /**
   * Lapsed chat holds and leases of an organization (their instance died) settled at their
   * amounts and written to the ledger: a crash never makes a call free. Off the request's path.
   */
  recordLapsed(orgId: string, now: Date): Promise<void>;
};

export type SpendLedgerDeps = { db: Database; redis: RedisHandle; rows: BatchWriter<SpendLedgerRow>; crossings?: BatchWriter<BudgetCrossingRow> };

export function createSpendUpkeep(deps: SpendLedgerDeps): SpendUpkeep {
  const rebuild = (scope: SpendScope, excludeLeaseRefs?: string[]) => ledgerWindowTotal(deps.db, scope, excludeLeaseRefs);
  /** Windows being rebuilt from Postgres now, by their settled counter's key. */
  const seeding = createSingleFlight<void>();
  return {
    recordCrossings(scopes, totals, nanos, costs) {
      for (const row of crossingRows(scopes, totals, nanos, new Date(), costs)) deps.crossings?.record(row);
    },
    async seedMissing(scopes, options = {}) {
      const seed = async (s: SpendScope) => {
        const now = new Date();
        await repairWindow(deps.redis.redis, s, await rebuild(s, options.excludeLeaseRefs), await runningJobHolds(deps.db, s, now), new Date(now.getTime() + CHAT_HOLD_LEASE_MS));
      };
      // A lease's step rebuilds on its own, leaving out its rows: a rebuild that counted them
      // would count its spend twice once the step adds it (the window is set only if missing,
      // so the first rebuild to land wins). Otherwise one rebuild a window at a time in this
      // process: every request in flight on a window found missing (a new project under load,
      // say) waits for the same one. Each used to run its own, and 32 of them at once took
      // 2-4 s of a busy Postgres (bench:scale-out).
      if (options.excludeLeaseRefs !== undefined) await Promise.all(scopes.map(seed));
      else await Promise.all(scopes.map((s) => seeding.run(windowKeys(s)[0], () => seed(s))));
    },
    async recordLapsed(orgId, now) {
      for (const lapsed of await sweepLapsedHolds(deps.redis.redis, orgId, now)) {
        const row = lapsed.row as Omit<SpendLedgerRow, 'amount' | 'state'>;
        deps.rows.record(Object.assign({}, row, { amount: toDollars(lapsed.nanos), state: 'settled' as const, createdAt: new Date(row.createdAt as unknown as string), updatedAt: now }));
      }
    },
  };
}

export function createSpendLedger(deps: SpendLedgerDeps, upkeep: SpendUpkeep = createSpendUpkeep(deps)): SpendLedger {
  const { recordCrossings, seedMissing, recordLapsed } = upkeep;

  async function reserve({ holdId, scopes, amount, leaseMs, now, lapseRow }: ReserveInput, rate?: RateWindow & { counted(rate: RateCount): void }): Promise<Hold | null> {
    const amountNanos = toNanos(amount);
    const lease = new Date(now.getTime() + leaseMs);
    let outcome = await holdSpend(deps.redis.redis, holdId, scopes, amountNanos, now, lease, rate, lapseRow);
    if (rate && outcome.rate) rate.counted(outcome.rate);
    if (outcome.state === 'rate_limited') return null;
    if (outcome.state === 'missing') {
      await seedMissing(outcome.windows as SpendScope[]);
      outcome = await holdSpend(deps.redis.redis, holdId, scopes, amountNanos, now, lease, undefined, lapseRow);
    }
    // A refused reservation sweeps too: the organization at its limit is where lapses matter most.
    if ((outcome.state === 'ok' || outcome.state === 'refused') && outcome.lapsed && scopes[0]) void recordLapsed(scopes[0].orgId, now).catch(() => undefined);
    if (outcome.state === 'missing') throw new GatewayError('dependency_unavailable', 'Spend counters are being rebuilt; try again.', { headers: { 'Retry-After': '1' } });
    if (outcome.state === 'refused') {
      const scope = outcome.window as SpendScope;
      throw refusal(scope, amount, scope.refusalDetails);
    }
    const registered = amountNanos > 0 && lapseRow !== undefined;
    return { id: holdId, scopes, amount, registered, rowId: registered ? lapseRow!.id : undefined };
  }

  return {
    async reserve(input) {
      return (await reserve(input))!;
    },

    reserveCounted({ rate, counted, ...input }) {
      return reserve(input, { counted, ...rate });
    },

    async settle(hold, cost, row) {
      const nanos = toNanos(cost);
      // The id a lapse of this hold would have used: if both are ever written, one is kept.
      const recordRow = () => {
        if (row && nanos !== 0) deps.rows.record(Object.assign({}, row, { amount: toDollars(nanos), state: 'settled' as const }, hold.rowId && { id: hold.rowId }));
      };
      let totals: Array<number | null>;
      try {
        // Counters first (rebuilt from the ledger if missing), then this cost's ledger row: a
        // rebuild never sees the row and adds the cost again. One round trip when none is missing.
        let outcome = await settleHoldUnlessMissing(deps.redis.redis, hold.id, hold.scopes, nanos, true, hold.registered);
        if (outcome.state === 'missing') {
          await seedMissing(outcome.windows as SpendScope[]);
          outcome = await settleHoldUnlessMissing(deps.redis.redis, hold.id, hold.scopes, nanos, false, hold.registered);
        }
        // Settled before (swept as lapsed while this call still ran): that row stands, no second one.
        if (outcome.state === 'already') return;
        totals = outcome.state === 'settled' ? outcome.totals : [];
      } catch (err) {
        // The cost stays the ledger's: its row is written, and the counters it may have missed
        // are dropped so that they are rebuilt from the ledger; a registered hold must not also lapse.
        recordRow();
        await deps.redis.redis.del(...hold.scopes.map((s) => windowKeys(s)[0])).catch(() => undefined);
        if (hold.registered) await unregisterHold(deps.redis.redis, hold.scopes, hold.id).catch(() => undefined);
        throw err;
      }
      recordRow();
      recordCrossings(hold.scopes, totals, nanos);
    },

    async release(hold) {
      try {
        await settleHold(deps.redis.redis, hold.id, hold.scopes, 0, hold.registered);
      } catch (err) {
        // Nothing was billed: a registered hold must not be recorded as lapsed later.
        if (hold.registered) await unregisterHold(deps.redis.redis, hold.scopes, hold.id).catch(() => undefined);
        throw err;
      }
    },

    async renew(hold, leaseMs, now) {
      await renewHold(deps.redis.redis, hold.id, hold.scopes, new Date(now.getTime() + leaseMs));
    },

    async spent(scopes) {
      let values = await settledNanos(deps.redis.redis, scopes);
      const missing = scopes.filter((_, i) => values[i] === null);
      if (missing.length > 0) {
        await seedMissing(missing);
        values = await settledNanos(deps.redis.redis, scopes);
      }
      return values.map((v) => toDollars(sumNanos([v ?? '0'])));
    },

    async flush() {
      // Every hold here settles in Redis as it ends: nothing is kept to flush.
    },
  };
}
