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
