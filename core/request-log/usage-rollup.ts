import { sql, type SQL } from 'drizzle-orm';

/**
 * The rollup upserts that ride on each request-log batch (batch writer `afterInsert`): the
 * batch's rows grouped by organization, UTC hour and attribution (key, project, model as the
 * client named it, provider, end user, tag set; absent ones as ''), added onto the counters of
 * `usage_hourly`, and the same split by cost center into `usage_hourly_cost_centers`.
 *
 * - `requests` counts every logged request, failed ones too; tokens come from `usage` (0 without).
 * - `cost` sums the estimated costs that exist; `unpriced_requests` counts the answered requests
 *   (status 2xx) whose cost is null. A failed request with no cost is not "unpriced": nothing was billed.
 * - By cost center, a request counts in each center it was charged to, and `cost` is that
 *   center's part (`cost_allocation`); a request no rule matched is all '' (unallocated).
 * - Rows are upserted in primary-key order so two writers touching the same hours take their
 *   row locks in the same order.
 */
export function usageRollupUpsert(inserted: SQL): SQL[] {
  return [rollupUpsert(inserted, false), rollupUpsert(inserted, true)];
}

/**
 * A video job's part of the rollups, upserted once, in the transaction that moves it to its
 * end (core/jobs/job-store.ts): what keys, budgets and commitments count must be in usage too.
 * It counts as one request in the hour the job was accepted (its ledger row's time, so usage
 * and the ledger agree hour by hour), under the model as the client named it (a route's slug),
 * with its cost when it succeeded and its cost-center split; no tokens.
 */
export function jobUsageRollup(jobId: string): SQL[] {
  const job = sql`(select j.org_id, j.created_at, j.key_id, j.project_id, coalesce(j.route_slug, j.model) as requested_model, j.provider,
      null::text as user_id, '{}'::jsonb as tags, null::jsonb as usage,
      case when j.status = 'succeeded' then (j.usage ->> 'cost')::numeric end as cost,
      case j.status when 'succeeded' then 200 when 'canceled' then 499 else 502 end as status, j.cost_allocation
    from jobs j where j.id = ${jobId})`;
  return usageRollupUpsert(job);
}

const COUNTERS = ['requests', 'prompt_tokens', 'completion_tokens', 'total_tokens', 'cost', 'unpriced_requests'];

function rollupUpsert(inserted: SQL, byCostCenter: boolean): SQL {
  // A usage count, or 0 when it is absent or not a number: a bad value never fails the batch.
  const n = (field: string) => sql.raw(`case when jsonb_typeof(i.usage -> '${field}') = 'number' then round((i.usage ->> '${field}')::numeric)::bigint else 0 end`);
  const prompt = n('prompt_tokens');
  const completion = n('completion_tokens');
  const total = sql`case when jsonb_typeof(i.usage -> 'total_tokens') = 'number' then round((i.usage ->> 'total_tokens')::numeric)::bigint else ${prompt} + ${completion} end`;
  const table = sql.raw(byCostCenter ? 'usage_hourly_cost_centers' : 'usage_hourly');
  const constraint = sql.raw(byCostCenter ? 'usage_hourly_cost_centers_pk' : 'usage_hourly_pk');
  const dimensions = byCostCenter ? 9 : 8;
  const positions = sql.raw(Array.from({ length: dimensions }, (_, i) => String(i + 1)).join(', '));
  const centerColumn = byCostCenter ? sql`, cost_center_id` : sql``;
  const center = byCostCenter ? sql`, coalesce(s.share ->> 'cost_center_id', '') as cost_center_id` : sql``;
  const cost = byCostCenter ? sql`coalesce(sum((s.share ->> 'cost')::numeric), 0)` : sql`coalesce(sum(i.cost), 0)`;
  // A row no rule allocated is one unallocated share of its whole cost.
  const shares = byCostCenter
    ? sql` cross join lateral jsonb_array_elements(coalesce(i.cost_allocation, jsonb_build_array(jsonb_build_object('cost_center_id', null, 'cost', i.cost)))) as s(share)`
    : sql``;
  return sql`
    insert into ${table} as u (org_id, hour, key_id, project_id, model, provider, user_id, tags${centerColumn},
      ${sql.raw(COUNTERS.join(', '))})
    select i.org_id, date_trunc('hour', i.created_at at time zone 'UTC') at time zone 'UTC' as hour,
      i.key_id, i.project_id, coalesce(i.requested_model, '') as model, coalesce(i.provider, '') as provider,
      coalesce(i.user_id, '') as user_id, coalesce(i.tags, '{}'::jsonb) as tags${center},
      count(*)::int, sum(${prompt})::bigint, sum(${completion})::bigint, sum(${total})::bigint,
      ${cost},
      (count(*) filter (where i.cost is null and i.status between 200 and 299))::int
    from ${inserted} i${shares}
    group by ${positions}
    order by ${positions}
    on conflict on constraint ${constraint} do update set
      ${sql.raw(COUNTERS.map((c) => `${c} = u.${c} + excluded.${c}`).join(',\n      '))}`;
}
