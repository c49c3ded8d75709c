import { z } from 'zod';
import { modelName, UNSTORABLE_TEXT } from '../validation';
import { unstorablePath } from '../../core/db/storable-text';
import { GatewayError } from '../../core/errors';
import { CHAT_PARAMETERS } from './chat-params';
import { CACHE_MODES, MAX_CACHE_TTL_SECONDS, MIN_CACHE_TTL_SECONDS, type CacheControl } from '../../core/response-cache/policy';

const contentPart = z.looseObject({ type: z.string() });
const toolCall = z.looseObject({ id: z.string(), type: z.literal('function'), function: z.looseObject({ name: z.string(), arguments: z.string() }) });
const message = z.looseObject({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
  content: z.union([z.string(), z.array(contentPart), z.null()]).optional(),
  tool_calls: z.array(toolCall).optional(),
  tool_call_id: z.string().optional(),
});

/**
 * The chat request as spec 4.1 bounds it. Unknown top-level fields pass through untouched
 * (they are forwarded to the provider), so the object is loose. Gateway extension fields
 * (`routing`, `fallbacks`, `logging`, `metadata`, `cache`) are checked here and never sent on.
 */
export const chatRequestSchema = z.looseObject({
  model: modelName,
  messages: z.array(message).min(1),
  ...CHAT_PARAMETERS,
  routing: z.object({
    providers: z.object({ allow: z.array(z.string()).optional(), deny: z.array(z.string()).optional() }).optional(),
    policy: z.enum(['cheapest', 'fastest', 'balanced']).optional(),
    regions: z.array(z.string()).optional(),
  }).optional(),
  fallbacks: z.array(z.string().min(1)).max(5).optional(),
  metadata: z.unknown().optional(),
  logging: z.boolean().optional(),
  cache: z.unknown().optional(),
});

export type ChatRequest = z.infer<typeof chatRequestSchema>;

/** The fields only the gateway reads; everything else goes to the provider. */
export const EXTENSION_FIELDS = ['routing', 'fallbacks', 'logging', 'metadata', 'cache'] as const;

/**
 * The extension fields (spec 4.1) a request of another client protocol (Anthropic Messages,
 * OpenAI Responses) carries beside its own: those protocols have `metadata` of their own, so
 * attribution comes from their fields instead.
 */
export const PROTOCOL_EXTENSION_FIELDS = {
  fallbacks: z.array(z.string().min(1)).max(5).optional(),
  routing: z.object({ providers: z.object({ allow: z.array(z.string()).optional(), deny: z.array(z.string()).optional() }).optional() }).optional(),
  logging: z.boolean().optional(),
  cache: z.unknown().optional(),
};
export const PROTOCOL_EXTENSION_NAMES: ReadonlySet<string> = new Set(Object.keys(PROTOCOL_EXTENSION_FIELDS));

/** A request without the fields only the gateway reads: what goes to the provider. */
export function withoutFields(request: Record<string, unknown>, names: ReadonlySet<string>): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const k in request) if (!names.has(k)) body[k] = request[k];
  return body;
}

export type Attribution = { userId: string | null; sessionId: string | null; tags: Record<string, string>; other: Record<string, unknown> };

const attributionSchema = z.looseObject({
  user_id: z.string().min(1).max(256).optional(),
  session_id: z.string().min(1).max(256).optional(),
  tags: z.record(z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'tag names are 1 to 64 letters, digits or . _ : -'), z.string().max(256))
    .refine((t) => Object.keys(t).length <= 20, 'at most 20 tags')
    .optional(),
}).refine((m) => JSON.stringify(m).length <= 8192, 'metadata is at most 8 KB');

/** `metadata` (spec 4.1): recorded, filterable by user, session and tags; 400 invalid_attribution otherwise. */
export function parseAttribution(value: unknown): Attribution {
  if (value === undefined || value === null) return { userId: null, sessionId: null, tags: {}, other: {} };
  const parsed = attributionSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new GatewayError('invalid_attribution', `Invalid \`metadata${issue.path.length ? `.${issue.path.join('.')}` : ''}\`: ${issue.message}.`);
  }
  // One such character would make Postgres refuse the request-log row (and, before rows were
  // retried one by one, the whole batch of every organization on this process).
  const unstorable = unstorablePath(parsed.data);
  if (unstorable) throw new GatewayError('invalid_attribution', `Invalid \`metadata.${unstorable.join('.')}\`: ${UNSTORABLE_TEXT}.`);
  const { user_id, session_id, tags, ...other } = parsed.data;
  return { userId: user_id ?? null, sessionId: session_id ?? null, tags: tags ?? {}, other };
}

/** The request's metadata as route rules match it (core/routing): the whole object, parsed. */
export function routingMetadata(attribution: Attribution): Record<string, unknown> {
  return Object.assign({}, attribution.other, { user_id: attribution.userId, session_id: attribution.sessionId, tags: attribution.tags });
}

const NAMESPACE = /^[A-Za-z0-9._:-]{1,128}$/;

const cacheBodySchema = z.strictObject({ mode: z.enum(CACHE_MODES).optional(), ttl_seconds: z.number().int().optional(), namespace: z.string().regex(NAMESPACE).optional() });

/** A TTL outside 60 to 2,592,000: below is a plain 400 on the field, above `cache_ttl_too_long`. */
function checkTtl(ttl: number, field: string): void {
  if (ttl < MIN_CACHE_TTL_SECONDS) throw new GatewayError('invalid_request', `\`${field}\` must be at least ${MIN_CACHE_TTL_SECONDS} seconds.`);
  if (ttl > MAX_CACHE_TTL_SECONDS) throw new GatewayError('cache_ttl_too_long', `\`${field}\` may be at most ${MAX_CACHE_TTL_SECONDS} seconds.`);
}

/**
 * The cache controls of spec 4.1, from the body and the X-GW-Cache headers (the body wins
 * field by field). A malformed header or body `cache` is 400 invalid_cache_control; the plan's
 * TTL maximum is checked with the organization's settings (core/response-cache/policy.ts).
 */
export function parseCacheControl(body: unknown, header: (name: string) => string): CacheControl {
  const fromHeaders: CacheControl = {};
  const mode = header('x-gw-cache');
  if (mode) {
    if (!(CACHE_MODES as readonly string[]).includes(mode.toLowerCase())) throw new GatewayError('invalid_cache_control', `X-GW-Cache must be one of ${CACHE_MODES.join(', ')}.`);
    fromHeaders.mode = mode.toLowerCase() as CacheControl['mode'];
  }
  const ttl = header('x-gw-cache-ttl');
  if (ttl) {
    if (!/^\d{1,10}$/.test(ttl)) throw new GatewayError('invalid_cache_control', 'X-GW-Cache-TTL must be a whole number of seconds.');
    fromHeaders.ttlSeconds = Number(ttl);
  }
  const namespace = header('x-gw-cache-namespace');
  if (namespace) {
    if (!NAMESPACE.test(namespace)) throw new GatewayError('invalid_cache_control', 'X-GW-Cache-Namespace must be 1 to 128 letters, digits or . _ : -.');
    fromHeaders.namespace = namespace;
  }
  let fromBody: CacheControl = {};
  if (body !== undefined) {
    const parsed = cacheBodySchema.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new GatewayError('invalid_cache_control', `Invalid \`cache${issue.path.length ? `.${issue.path.join('.')}` : ''}\`: ${issue.message}.`);
    }
    fromBody = { mode: parsed.data.mode, ttlSeconds: parsed.data.ttl_seconds, namespace: parsed.data.namespace };
    if (fromBody.ttlSeconds !== undefined) checkTtl(fromBody.ttlSeconds, 'cache.ttl_seconds');
  }
  if (fromBody.ttlSeconds === undefined && fromHeaders.ttlSeconds !== undefined) checkTtl(fromHeaders.ttlSeconds, 'X-GW-Cache-TTL');
  return {
    mode: fromBody.mode ?? fromHeaders.mode,
    ttlSeconds: fromBody.ttlSeconds ?? fromHeaders.ttlSeconds,
    namespace: fromBody.namespace ?? fromHeaders.namespace,
  };
}
