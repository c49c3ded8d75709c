/**
 * The money soak's reconciliation (bench/soak-money.ts): per organization, the sandbox's bill
 * against the ledger, usage rollups, the request log and job costs.
 *
 * - Under-charge: for each request id (and each video job) the bill holds, what it billed
 *   beyond what the ledger counts under that id. A process SIGKILLed with calls in flight has
 *   their settles die with it; its spend lease lapses and is recorded in full (a row whose
 *   request id is the lease's). Such rows may cover the shortfall of requests sent to a killed
 *   process, and of nothing else. What remains must be 0.
 * - The limit: the lifetime-limited key's bill at most its limit plus, for each attempt beyond
 *   the first that the gateway cut in one request, the mix's dearest worst case
 *   (docs/decisions.md, "The bounds").
 * - The log: every request the client saw answered has exactly one request-log row.
 * - Jobs: no job with more than one render billed.
 */
import type { Client as PgClient } from 'pg';
import type { BillLine } from '../../sandbox/bill';
import type { Sandbox } from '../../sandbox/server';
import type { Sent, SoakOrg } from '../soak-money';
import { MAX_WORST_CASE_USD } from './traffic';

export type Finding = { org: number; check: string; detail: string };
export type OrgReport = {
  org: number; requests: number; answered: number; billed: number; ledger: number; underCharge: number; overCharge: number; leaseLapses: number;
  usage: number; loggedCost: number; jobCosts: number; logMissing: number; logTwice: number; multiRenderJobs: number;
  limitedKeyBill: number; limitedKeyLimit: number; limitBound: number;
};

/** Amounts are compared to the nano-dollar the ledger keeps. */
const EPSILON = 1e-9;

const jobOfKey = (idempotencyKey: string) => idempotencyKey.replace(/-\d+$/, '');

function add(map: Map<string, number>, key: string, amount: number): void {
  map.set(key, (map.get(key) ?? 0) + amount);
}

/**
 * The API processes SIGKILLed, and when. A call billed before a kill that neither the client
 * saw answered nor the log holds was in flight on the killed process (its client got a broken
 * connection, so no request id): it counts as that process's.
 */
export type Killed = { pids: ReadonlySet<number>; at: readonly number[] };

export async function reconcile(pg: PgClient, sandbox: Sandbox, orgs: SoakOrg[], sent: Sent[], killed: Killed): Promise<{ reports: OrgReport[]; findings: Finding[] }> {
  const killedPids = killed.pids;
  const reports: OrgReport[] = [];
  const findings: Finding[] = [];
  const byRequestId = new Map(sent.filter((s) => s.requestId).map((s) => [s.requestId!, s]));
  const byTag = new Map(sent.map((s) => [s.tag, s]));
  // A call whose client never saw its id is known by its tag on the bill line.
  for (const org of orgs) for (const line of sandbox.bill.lines(org.secret)) if (line.requestId && line.tag && !byRequestId.has(line.requestId) && byTag.has(line.tag)) byRequestId.set(line.requestId, byTag.get(line.tag)!);

  for (const [o, org] of orgs.entries()) {
    const finding = (check: string, detail: string) => findings.push({ org: o, check, detail });
    const lines: BillLine[] = sandbox.bill.lines(org.secret);
    const billed = new Map<string, number>();
    const renders = new Map<string, number>();
    let unattributed = 0;
    for (const line of lines) {
      if (line.usd === null) finding('unpriced bill line', `${line.model} at ${line.endpoint}`);
      const usd = line.usd ?? 0;
      if (line.requestId) add(billed, line.requestId, usd);
      else if (line.idempotencyKey) {
        const job = jobOfKey(line.idempotencyKey);
        add(billed, `job:${job}`, usd);
        renders.set(job, (renders.get(job) ?? 0) + 1);
      } else unattributed += usd;
    }
    if (unattributed > EPSILON) finding('bill line without a request id', `$${unattributed}`);

    const ledgerRows = (await pg.query<{ request_id: string | null; job_id: string | null; amount: number; lineage_id: string }>(
      "SELECT request_id, job_id, amount::float8 AS amount, lineage_id FROM spend_ledger WHERE org_id = $1 AND state = 'settled'", [org.orgId])).rows;
    const charged = new Map<string, number>();
    let leaseLapses = 0;
    let ledgerTotal = 0;
    for (const row of ledgerRows) {
      ledgerTotal += row.amount;
      if (row.job_id) add(charged, `job:${row.job_id}`, row.amount);
      else if (row.request_id?.startsWith('lease:')) leaseLapses += row.amount;
      else if (row.request_id) add(charged, row.request_id, row.amount);
    }

    // The request log, read first: it says what each request was.
    const logRows = (await pg.query<{ id: string; n: number; key_id: string; status: number; endpoint: string; attempts: Array<{ outcome: string }> }>(
      'SELECT id, count(*)::int AS n, min(key_id) AS key_id, min(status) AS status, min(endpoint) AS endpoint, (array_agg(attempts))[1] AS attempts FROM request_logs WHERE org_id = $1 GROUP BY id', [org.orgId])).rows;
    const logged = new Map(logRows.map((r) => [r.id, r]));
    const lineOf = new Map(lines.filter((l) => l.requestId).map((l) => [l.requestId!, l]));
    const describe = (id: string) => {
      const s = byRequestId.get(id);
      const row = logged.get(id);
      const line = lineOf.get(id);
      const sinceKill = line && killed.at.length > 0 ? `; billed ${((Date.parse(line.at) - killed.at[0]!) / 1000).toFixed(2)} s after the kill` : '';
      return `${s?.op ?? 'not seen by the client'}${s?.hungUp ? ', client left' : ''}${s?.broken ? ', answer broken off' : ''}; ${line ? `${line.model} at ${line.endpoint}` : ''}; ${row ? `logged ${row.status} ${row.endpoint}, attempts ${row.attempts.map((a) => a.outcome).join(',')}` : 'not logged'}${s && killedPids.has(s.pid) ? '; on the killed process' : ''}${sinceKill}`;
    };

    // What the bill holds beyond the ledger, request by request; a killed process's lapses cover only its own requests.
    let coverable = 0;
    const killedShort: string[] = [];
    let uncovered = 0;
    const shortOnes: string[] = [];
    for (const [id, usd] of billed) {
      const short = usd - (charged.get(id) ?? 0);
      if (short <= EPSILON) continue;
      const s = byRequestId.get(id);
      const line = lineOf.get(id);
      // Reached the provider before a kill (its bill line may be written later: a call held by `delay_ms` is billed when the delay ends).
      const inFlightAtKill = !s && !logged.has(id) && line !== undefined && killed.at.some((t) => Date.parse(line.receivedAt) <= t);
      if ((s && killedPids.has(s.pid)) || inFlightAtKill) {
        coverable += short;
        killedShort.push(`${id} (${describe(id)}${s ? `, key ${s.key}` : ''}): short $${short.toFixed(9)}`);
      }
      else {
        uncovered += short;
        shortOnes.push(`${id} (${describe(id)}): billed $${usd.toFixed(9)}, charged $${(charged.get(id) ?? 0).toFixed(9)}`);
      }
    }
    const underCharge = uncovered + Math.max(0, coverable - leaseLapses);
    if (underCharge > EPSILON) finding('under-charge', `$${underCharge.toFixed(9)}: ${shortOnes.slice(0, 5).join('; ')}${coverable > leaseLapses ? `; killed processes' requests short $${coverable.toFixed(9)} against lapses $${leaseLapses.toFixed(9)}: ${killedShort.slice(0, 5).join('; ')}` : ''}`);
    const billedTotal = [...billed.values()].reduce((a, b) => a + b, 0) + unattributed;

    // The request log: once per model call served (a 2xx answer; a video job is followed in the jobs table instead).
    const answered = sent.filter((s) => s.org === o && s.requestId && s.status !== null && s.status >= 200 && s.status < 300 && s.op !== 'video' && !s.hungUp && !s.broken);
    let logMissing = 0;
    let logTwice = 0;
    for (const s of answered) {
      const row = logged.get(s.requestId!);
      if (!row) {
        logMissing += 1;
        if (logMissing <= 3) finding('answered request missing from the log', `${s.requestId} (${s.status}; ${describe(s.requestId!)})`);
      } else if (row.n > 1) {
        logTwice += 1;
        if (logTwice <= 3) finding('request logged twice', `${s.requestId} (${s.op}): ${row.n} rows`);
      }
    }

    // The lifetime-limited key: what the provider billed for its requests, against its limit and the bound.
    const limited = org.keys[0]!;
    let limitedKeyBill = 0;
    let limitBound = 0;
    const limitedLineage = (await pg.query<{ lineage_id: string }>('SELECT lineage_id FROM gateway_keys WHERE id = $1', [limited.id])).rows[0]?.lineage_id ?? limited.id;
    for (const [id, usd] of billed) {
      if (id.startsWith('job:')) continue;
      const row = logged.get(id);
      const onLimited = row ? row.key_id === limited.id : byRequestId.get(id)?.key === 0 && byRequestId.get(id)?.org === o;
      if (!onLimited) continue;
      limitedKeyBill += usd;
      const cuts = (row?.attempts ?? []).filter((a) => a.outcome === 'timeout').length;
      limitBound += Math.max(0, cuts - 1) * MAX_WORST_CASE_USD;
    }
    if (limited.limit !== null && limitedKeyBill > limited.limit + limitBound + EPSILON) {
      finding('limit passed beyond the bound', `key ${limited.id} (lineage ${limitedLineage}): billed $${limitedKeyBill.toFixed(6)} against $${limited.limit} + $${limitBound.toFixed(6)}`);
    }

    const multi = [...renders.entries()].filter(([, n]) => n > 1);
    for (const [job, n] of multi.slice(0, 3)) finding('job rendered more than once', `${job}: ${n} renders billed`);

    const usage = (await pg.query<{ c: number | null }>('SELECT sum(cost)::float8 AS c FROM usage_hourly WHERE org_id = $1', [org.orgId])).rows[0]?.c ?? 0;
    const loggedCost = (await pg.query<{ c: number | null }>('SELECT sum(cost)::float8 AS c FROM request_logs WHERE org_id = $1', [org.orgId])).rows[0]?.c ?? 0;
    const jobCosts = (await pg.query<{ c: number | null }>("SELECT sum((usage->>'cost')::float8) AS c FROM jobs WHERE org_id = $1", [org.orgId])).rows[0]?.c ?? 0;

    reports.push({
      org: o, requests: sent.filter((s) => s.org === o).length, answered: answered.length, billed: billedTotal, ledger: ledgerTotal, underCharge,
      overCharge: Math.max(0, ledgerTotal - billedTotal), leaseLapses, usage, loggedCost, jobCosts, logMissing, logTwice, multiRenderJobs: multi.length,
      limitedKeyBill, limitedKeyLimit: limited.limit ?? 0, limitBound,
    });
  }
  return { reports, findings };
}
