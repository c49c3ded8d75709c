/**
 * An API process's spend leases, alone, as a process a test can SIGKILL (issue 37): it spends on
 * one key until its lease on the key is held in Redis, says what it holds on stdout, and waits.
 */
import { createSpendLedger, createSpendUpkeep, type SpendLedgerRow } from '../../core/spend/ledger';
import { createSpendLeases, leasedSpendLedger } from '../../core/spend/leases';
import { createRateLeases } from '../../core/ratelimit/rate-leases';
import { windowKeys } from '../../core/spend/holds';
import { scopeAt } from '../../core/spend/scopes';
import { connectDatabase } from '../../core/db/client';
import { connectRedis } from '../../core/redis';

async function main(): Promise<void> {
  const [org, lineage, limit] = [process.env.LEASE_ORG!, process.env.LEASE_LINEAGE!, Number(process.env.LEASE_LIMIT)];
  const redis = connectRedis(process.env.REDIS_URL!, process.env.REDIS_KEY_PREFIX!);
  const database = connectDatabase(process.env.DATABASE_URL!, { max: 1 });
  const rows: SpendLedgerRow[] = [];
  const writer = { record: (row: SpendLedgerRow) => void rows.push(row), dropped: () => 0, queued: () => 0, onFlush: () => undefined, flush: async () => undefined, pending: () => () => undefined, recover: async () => 0, close: async () => undefined };
  const deps = { db: database.db, redis, rows: writer };
  const upkeep = createSpendUpkeep(deps);
  const leases = createSpendLeases({ redis, upkeep, stepMs: 50 });
  const spend = leasedSpendLedger(createSpendLedger(deps, upkeep), leases, { ...deps, rate: createRateLeases({ redis }) });
  const scope = scopeAt(org, { kind: 'key', id: lineage, code: 'key_budget', limit, blocking: true, period: 'never', ledger: { column: 'lineage_id', value: lineage } }, new Date(), 1);
  let drawn = 0;
  for (let i = 0; ; i++) {
    const row = { id: `spend_kill${i}`, orgId: org, lineageId: lineage, projectId: 'proj_t', memberId: null, endUserId: null, endUserScope: null, requestId: `kill${i}`, createdAt: new Date(), updatedAt: new Date(), provider: null, model: null };
    const hold = await spend.reserve({ holdId: `kill${i}`, scopes: [scope], amount: 0.01, leaseMs: 60_000, now: new Date(), lapseRow: row, leasable: true });
    if (hold.lease) drawn += 1;
    await spend.settle(hold, 0.01, row);
    await new Promise((resolve) => setTimeout(resolve, 2));
    if (drawn >= 20) break;
  }
  // A request in flight drawn from the lease (one that holds exactly, during a step, is settled and another tried).
  const inFlightRow = (i: number) => ({ id: `spend_kill_in_flight${i}`, orgId: org, lineageId: lineage, projectId: 'proj_t', memberId: null, endUserId: null, endUserScope: null, requestId: `kill_in_flight${i}`, createdAt: new Date(), updatedAt: new Date(), provider: null, model: null });
  let inFlight = await spend.reserve({ holdId: 'kill_in_flight0', scopes: [scope], amount: 0.01, leaseMs: 60_000, now: new Date(), lapseRow: inFlightRow(0), leasable: true });
  for (let i = 1; !inFlight.lease && i < 100; i++) {
    await spend.settle(inFlight, 0.01, inFlightRow(i - 1));
    await new Promise((resolve) => setTimeout(resolve, 5));
    inFlight = await spend.reserve({ holdId: `kill_in_flight${i}`, scopes: [scope], amount: 0.01, leaseMs: 60_000, now: new Date(), lapseRow: inFlightRow(i), leasable: true });
  }
  // The lease it draws on, held in Redis (a request in flight keeps it there, at least at its worst case).
  const [, , , amounts] = windowKeys(scope);
  const held = await redis.redis.hgetall(amounts);
  const leaseId = Object.keys(held).find((id) => id.startsWith('lease:'))!;
  process.stdout.write(`${JSON.stringify({ leaseId, leaseNanos: Number(held[leaseId]), inFlightLeased: Boolean(inFlight.lease), settledRows: rows.length })}\n`);
  // Waits to be killed; its lease keeps being stepped until then.
  setInterval(() => undefined, 60_000);
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
