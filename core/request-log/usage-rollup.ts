import { sql, type SQL } from 'drizzle-orm';

/**
 * The `usage_hourly` upsert that rides on each request-log batch (batch writer `afterInsert`):
 * the batch's rows grouped by organization, UTC hour and attribution (key, project, model as the
 * client named it, provider, end user, tag set; absent ones as ''), added onto the counters.
 *
 * - `requests` counts every logged request, failed ones too; tokens come from `usage` (0 without).
 * - `cost` sums the estimated costs that exist; `unpriced_requests` counts the answered requests
 *   (status 2xx) whose cost is null. A failed request with no cost is not "unpriced": nothing was billed.
 * - Rows are upserted in primary-key order so two writers touching the same hours take their
 *   row locks in the same order.
 */
export function usageRollupUpsert(inserted: SQL): SQL {
  // A usage count, or 0 when it is absent or not a number: a bad value never fails the batch.
  const n = (field: string) => sql.raw(`case when jsonb_typeof(i.usage -> '${field}') = 'number' then round((i.usage ->> '${field}')::numeric)::bigint else 0 end`);
  const prompt = n('prompt_tokens');
  const completion = n('completion_tokens');
  const total = sql`case when jsonb_typeof(i.usage -> 'total_tokens') = 'number' then round((i.usage ->> 'total_tokens')::numeric)::bigint else ${prompt} + ${completion} end`;
  return sql`
    insert into usage_hourly as u (org_id, hour, key_id, project_id, model, provider, user_id, tags,
      requests, prompt_tokens, completion_tokens, total_tokens, cost, unpriced_requests)
    select i.org_id, date_trunc('hour', i.created_at at time zone 'UTC') at time zone 'UTC' as hour,
      i.key_id, i.project_id, coalesce(i.requested_model, '') as model, coalesce(i.provider, '') as provider,
      coalesce(i.user_id, '') as user_id, coalesce(i.tags, '{}'::jsonb) as tags,
      count(*)::int, sum(${prompt})::bigint, sum(${completion})::bigint, sum(${total})::bigint,
      coalesce(sum(i.cost), 0),
      (count(*) filter (where i.cost is null and i.status between 200 and 299))::int
    from ${inserted} i
    group by 1, 2, 3, 4, 5, 6, 7, 8
    order by 1, 2, 3, 4, 5, 6, 7, 8
    on conflict on constraint usage_hourly_pk do update set
      requests = u.requests + excluded.requests,
      prompt_tokens = u.prompt_tokens + excluded.prompt_tokens,
      completion_tokens = u.completion_tokens + excluded.completion_tokens,
      total_tokens = u.total_tokens + excluded.total_tokens,
      cost = u.cost + excluded.cost,
      unpriced_requests = u.unpriced_requests + excluded.unpriced_requests`;
}
