import { SpanStatusCode, type Attributes } from '@opentelemetry/api';
import type { RequestLogEntry } from '../request-log/writer';
import type { Candidate } from '../routing/candidates';
import { SPAN_KIND, type AttributeReader, type RecordedSpan } from './span-recorder';
import type { RequestTrace } from './tracing';

/**
 * The client span of each upstream attempt, named and attributed per the OpenTelemetry GenAI
 * semantic conventions (`{gen_ai.operation.name} {gen_ai.request.model}`, kind CLIENT), with the
 * gateway's own attributes under `gw.`. A failed attempt's span ends as it fails, with its failure
 * kind as `error.type` and `gw.failure_kind`; the serving attempt's span stays open until the
 * request-log row is recorded, which says what the call produced (model served, tokens, cost),
 * streamed or not.
 */

/** `gen_ai.provider.name`: the conventions' well-known values where one names the connection's kind. */
const GEN_AI_PROVIDER: Record<string, string> = {
  openai: 'openai', azure_openai: 'azure.ai.openai', anthropic: 'anthropic', google: 'gcp.gemini', mistral: 'mistral_ai',
  groq: 'groq', deepseek: 'deepseek', xai: 'x_ai', perplexity: 'perplexity',
};

function genAiProviderName(kind: string): string {
  return GEN_AI_PROVIDER[kind] ?? kind;
}

/** The GenAI operation of a gateway path (what `gen_ai.operation.name` says). */
export function genAiOperationOf(path: string): string {
  if (path.startsWith('/v1/embeddings')) return 'embeddings';
  if (path.startsWith('/v1/images') || path.startsWith('/v1/audio') || path.startsWith('/v1/videos')) return 'generate_content';
  return 'chat';
}

/** `server.address` of a base URL, parsed once per URL. */
const hosts = new Map<string, string | null>();
function hostOf(baseUrl: string): string | null {
  let host = hosts.get(baseUrl);
  if (host === undefined) {
    try {
      host = new URL(baseUrl).hostname;
    } catch {
      host = null;
    }
    if (hosts.size > 1000) hosts.clear();
    hosts.set(baseUrl, host);
  }
  return host;
}

export function startAttemptSpan(rt: RequestTrace, candidate: Candidate, position: string): RecordedSpan {
  const host = hostOf(candidate.connection.baseUrl);
  const attributes: Attributes = {
    'gen_ai.operation.name': rt.operation,
    'gen_ai.provider.name': genAiProviderName(candidate.connection.kind),
    'gen_ai.request.model': candidate.upstreamModel,
    'gw.attempt.position': position,
    'gw.connection.id': candidate.connection.id,
    'gw.model': candidate.modelId,
  };
  if (host) attributes['server.address'] = host;
  return rt.child(`${rt.operation} ${candidate.upstreamModel}`, SPAN_KIND.client, attributes);
}

export function endFailedAttempt(span: RecordedSpan, kind: string, status: number | null): void {
  span.setAttribute('gw.failure_kind', kind);
  span.setAttribute('error.type', kind);
  if (status !== null) span.setAttribute('http.response.status_code', status);
  span.setStatus({ code: SpanStatusCode.ERROR, message: kind });
  span.end();
}

/** The serving attempt: what a whole (not streamed) chat answer says now; the rest when its row is recorded. */
export function keepServedAttempt(rt: RequestTrace, candidate: Candidate, span: RecordedSpan, value: unknown): void {
  const finishReasons = finishReasonsOf(value);
  if (finishReasons) span.setAttribute('gen_ai.response.finish_reasons', finishReasons);
  rt.keepOpen(candidate.connection.id, span);
}

/**
 * Ends the row's serving attempt span, and puts what the request came to on the server span. The
 * row's fields are read when the spans are encoded, a few dozen spans at a time.
 */
export function endRequestFromRow(rt: RequestTrace, row: RequestLogEntry): void {
  rt.server.attributesFrom(row, serverRowAttributes);
  const served = rt.takeServed(row.connectionId);
  if (!served) return;
  served.attributesFrom(row, servedRowAttributes);
  served.end();
}

const serverRowAttributes: AttributeReader<RequestLogEntry> = (row, out) => {
  if (row.routeSlug) out.push('gw.route', row.routeSlug);
  if (row.cacheStatus) out.push('gw.cache', row.cacheStatus);
  if (typeof row.cost === 'number') out.push('gw.cost_usd', row.cost);
  if (row.requestedModel) out.push('gen_ai.request.model', row.requestedModel);
  if (row.errorCode) out.push('gw.error_code', row.errorCode);
};

const servedRowAttributes: AttributeReader<RequestLogEntry> = (row, out) => {
  if (row.servedModel) out.push('gen_ai.response.model', row.servedModel);
  if (row.routeSlug) out.push('gw.route', row.routeSlug);
  if (typeof row.cost === 'number') out.push('gw.cost_usd', row.cost);
  const usage = row.usage as { prompt_tokens?: unknown; completion_tokens?: unknown } | null | undefined;
  if (typeof usage?.prompt_tokens === 'number') out.push('gen_ai.usage.input_tokens', usage.prompt_tokens);
  if (typeof usage?.completion_tokens === 'number') out.push('gen_ai.usage.output_tokens', usage.completion_tokens);
  if (row.id) out.push('gw.request_id', row.id);
};

function finishReasonsOf(value: unknown): string[] | undefined {
  const choices = (value as { choices?: Array<{ finish_reason?: unknown }> } | null)?.choices;
  if (!Array.isArray(choices)) return undefined;
  const reasons = choices.map((c) => c.finish_reason).filter((r): r is string => typeof r === 'string');
  return reasons.length > 0 ? reasons : undefined;
}
