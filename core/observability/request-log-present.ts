import { z } from 'zod';
import { listEnvelope } from '../paging';
import { unixSeconds } from '../clock';
import type { RequestLogMetadata, RequestLogRow, TraceTotals } from './request-log-query';

/**
 * How a request-log row is shown (issue 13). Metadata only, always: the prompt and the answer
 * are added by `withBodies`, which only the gateway's single read calls, for a key with
 * `payload_access` and while the organization's prompt retention still covers the row. The
 * management API never calls it.
 */

const attemptSchema = z.object({
  connection_id: z.string(),
  provider: z.string(),
  model: z.string(),
  position: z.string().meta({ description: 'Where in the chain this attempt was: `primary`, `fallback:1`, a route target, ...' }),
  outcome: z.string().meta({ description: '`ok`, or the failure kind (`rate_limit`, `server_error`, `timeout`, `connection`, `credential`, ...).' }),
  failure_kind: z.string().nullable(),
  status: z.number().int().nullable(),
  latency_ms: z.number(),
});

const usageSchema = z.object({
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
  total_tokens: z.number(),
  cached_tokens: z.number().nullable(),
  reasoning_tokens: z.number().nullable(),
});

export const requestLogSchema = z.object({
  id: z.string().meta({ description: 'The request id (`X-GW-Request-Id`).' }),
  object: z.literal('request_log'),
  created_at: z.number().int().meta({ description: 'Unix seconds.' }),
  endpoint: z.string(),
  key_id: z.string(),
  project_id: z.string(),
  model: z.string().nullable().meta({ description: 'The model as the client named it.' }),
  route: z.string().nullable().meta({ description: 'The route slug, when the model named a route.' }),
  served_model: z.string().nullable(),
  provider: z.string().nullable(),
  connection_id: z.string().nullable(),
  chain_position: z.string().nullable(),
  status: z.number().int().meta({ description: 'The HTTP status answered.' }),
  error: z.object({ type: z.string(), code: z.string().nullable() }).nullable(),
  stream: z.boolean(),
  latency_ms: z.number().int(),
  attempts: z.array(attemptSchema),
  usage: usageSchema.nullable(),
  estimated_cost: z.number().nullable().meta({ description: 'Estimated provider cost in US dollars; null when unpriced or not served.' }),
  price_source: z.string().nullable(),
  cache: z.object({
    status: z.string().nullable().meta({ description: '`hit`, `miss`, `bypass`, `uncacheable`; null when the cache was off.' }),
    source_request_id: z.string().nullable().meta({ description: 'On a hit, the request whose answer was served.' }),
  }),
  guardrails: z.object({
    action: z.string(),
    findings: z.array(z.object({ detector: z.string(), stage: z.string(), action: z.string(), count: z.number().int() })),
  }).nullable().meta({ description: 'What guardrails did; what they matched is never stored.' }),
  metadata: z.object({ user_id: z.string().nullable(), session_id: z.string().nullable(), tags: z.record(z.string(), z.string()) }),
  params_dropped: z.array(z.string()),
  decision_id: z.string().nullable().meta({ description: 'Endpoint `decisions`: the decision (`dec_...`) this model call answered.' }),
  trace_url: z.string().nullable().meta({ description: 'The trace in the operator\'s tracing UI (GW_TRACE_URL_TEMPLATE), for the operator\'s own organization; null otherwise.' }),
  trace_id: z.string().nullable().meta({ description: 'The W3C trace id the request ran in (`X-GW-Trace-Id`): the gateway\'s own trace when traces are exported, else the caller\'s `traceparent`; null when neither.' }),
  allocation: z.object({
    rule_id: z.string().nullable().meta({ description: 'The cost-center rule (lineage id) that allocated the request; null when none matched.' }),
    rule_version_id: z.string().nullable().meta({ description: 'The rule\'s version in force when the request was served.' }),
    shares: z.array(z.object({
      cost_center_id: z.string().nullable().meta({ description: 'Null: unallocated.' }),
      percent: z.number(),
      cost: z.number().nullable().meta({ description: 'This part of `estimated_cost`, US dollars; the parts add up to it exactly.' }),
    })),
  }).meta({ description: 'Who the request was charged to (cost centers).' }),
}).meta({ id: 'RequestLog' });

export type PresentedRequestLog = z.infer<typeof requestLogSchema>;

export const requestLogListSchema = listEnvelope(requestLogSchema);

export const traceSchema = z.object({
  id: z.string().meta({ description: 'The run\'s `metadata.session_id`.' }),
  object: z.literal('trace'),
  request_count: z.number().int(),
  estimated_cost: z.number().meta({ description: 'Sum of the priced requests\' estimated cost, US dollars.' }),
  unpriced_request_count: z.number().int(),
  usage: z.object({ prompt_tokens: z.number(), completion_tokens: z.number(), total_tokens: z.number() }),
  first_request_at: z.number().int(),
  last_request_at: z.number().int(),
  requests: requestLogListSchema.meta({ description: 'The run\'s requests, oldest first, a page at a time (`limit`, `after`).' }),
}).meta({ id: 'Trace' });

function tokenCount(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function presentUsage(usage: Record<string, unknown> | null): PresentedRequestLog['usage'] {
  if (!usage) return null;
  const details = (key: string) => (usage[key] && typeof usage[key] === 'object' ? usage[key] as Record<string, unknown> : {});
  return {
    prompt_tokens: tokenCount(usage.prompt_tokens) ?? 0,
    completion_tokens: tokenCount(usage.completion_tokens) ?? 0,
    total_tokens: tokenCount(usage.total_tokens) ?? 0,
    cached_tokens: tokenCount(details('prompt_tokens_details').cached_tokens),
    reasoning_tokens: tokenCount(details('completion_tokens_details').reasoning_tokens),
  };
}

/** A row's metadata; never its prompt or answer. */
export function presentRequestLog(row: RequestLogMetadata, traceUrl: string | null = null): PresentedRequestLog {
  return {
    id: row.id,
    object: 'request_log',
    created_at: unixSeconds(row.createdAt),
    endpoint: row.endpoint,
    key_id: row.keyId,
    project_id: row.projectId,
    model: row.requestedModel,
    route: row.routeSlug,
    served_model: row.servedModel,
    provider: row.provider,
    connection_id: row.connectionId,
    chain_position: row.chainPosition,
    status: row.status,
    error: row.errorType ? { type: row.errorType, code: row.errorCode } : null,
    stream: row.stream,
    latency_ms: row.latencyMs,
    attempts: (row.attempts ?? []).map((a) => ({
      connection_id: a.connection_id,
      provider: a.provider,
      model: a.model,
      position: a.position,
      outcome: a.outcome,
      failure_kind: a.outcome === 'ok' ? null : a.outcome,
      status: a.status,
      latency_ms: a.latency_ms,
    })),
    usage: presentUsage(row.usage),
    estimated_cost: row.cost === null ? null : Number(row.cost),
    price_source: row.priceSource,
    cache: { status: row.cacheStatus, source_request_id: row.cacheSourceRequestId },
    guardrails: row.guardrails ? { action: row.guardrails.action, findings: row.guardrails.findings.map((f) => ({ detector: f.detector, stage: f.stage, action: f.action, count: f.count })) } : null,
    metadata: { user_id: row.userId, session_id: row.sessionId, tags: row.tags ?? {} },
    params_dropped: row.paramsDropped ?? [],
    decision_id: row.decisionId,
    trace_id: row.traceId,
    trace_url: traceUrl,
    allocation: presentAllocation(row),
  };
}

/** No rule matched: the whole request, and its whole cost, unallocated. */
function presentAllocation(row: RequestLogMetadata): PresentedRequestLog['allocation'] {
  const cost = row.cost === null ? null : Number(row.cost);
  return {
    rule_id: row.costRuleId,
    rule_version_id: row.costRuleVersionId,
    shares: row.costAllocation ?? [{ cost_center_id: null, percent: 100, cost }],
  };
}

/**
 * The gateway's single read with payload access: `request` and `response` as stored, null when
 * nothing was captured (prompt logging off, `logging: false`) or the retention has passed, even
 * before the retention schedule has deleted them.
 */
export function withBodies(row: RequestLogRow, retainedSince: Date): PresentedRequestLog & { request: unknown; response: unknown } {
  const retained = row.createdAt >= retainedSince;
  return { ...presentRequestLog(row), request: retained ? row.requestBody ?? null : null, response: retained ? row.responseBody ?? null : null };
}

export function presentTrace<T>(sessionId: string, totals: TraceTotals, requests: T) {
  return {
    id: sessionId,
    object: 'trace' as const,
    request_count: totals.requestCount,
    estimated_cost: totals.estimatedCost,
    unpriced_request_count: totals.unpricedRequestCount,
    usage: { prompt_tokens: totals.promptTokens, completion_tokens: totals.completionTokens, total_tokens: totals.totalTokens },
    first_request_at: totals.firstAt ? unixSeconds(totals.firstAt) : 0,
    last_request_at: totals.lastAt ? unixSeconds(totals.lastAt) : 0,
    requests,
  };
}
