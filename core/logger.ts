import pino from 'pino';

export type Logger = pino.Logger;

const CENSOR = '[redacted]';

/**
 * Names of headers and fields that can hold a credential. Whatever object a log line carries,
 * a property with one of these names is cut at any depth (request and response objects,
 * options of an HTTP client, a connection's config). Idempotency-Key is kept: it is not one.
 */
export const SENSITIVE_KEYS: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'x-api-key',
  'api-key',
  'x-goog-api-key',
  'cookie',
  'set-cookie',
  'secret',
  'secrets',
  'fallback_secrets',
  'signing_secret',
  'management_token',
  'password',
  'token',
  'credential',
  'credentials',
  'chatapp_url',
  'sealed',
  'sealed_secret',
  'sealedSecret',
  'sealedSecrets',
  'secretSealed',
]);

const MAX_DEPTH = 8;

function isSensitive(key: string): boolean {
  const k = key.toLowerCase();
  return SENSITIVE_KEYS.has(key) || SENSITIVE_KEYS.has(k) || k.startsWith('sealed');
}

/** A copy of `value` with every sensitive property censored; leaves the caller's objects alone. */
export function redactDeep(value: unknown, depth = 0, seen: WeakSet<object> = new WeakSet()): unknown {
  if (typeof value === 'string') return scrubText(value);
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return errorSummary(value);
  if (seen.has(value) || depth > MAX_DEPTH) return '[object]';
  seen.add(value);
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, depth + 1, seen));
  if (value instanceof Date || Buffer.isBuffer(value)) return value;
  // URL and the like: what JSON would write, then checked like anything else.
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return redactDeep(toJSON.call(value), depth + 1, seen);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = isSensitive(k) ? CENSOR : redactDeep(v, depth + 1, seen);
  return out;
}

/**
 * Whether a text may hold what scrubText cuts: one test of every pattern's start, so the
 * common text (a message, a path, an id) is not rewritten four times to change nothing.
 */
const MAY_HOLD_CREDENTIAL = /bearer|basic|\/\/[^\s]*@|(sk|gwk|gwm|whsec)[-_]|AIza/i;

/** Whether a log call's argument is a text that may hold a credential (one function, not a closure a call). */
function mayHoldCredential(arg: unknown): boolean {
  return typeof arg === 'string' && MAY_HOLD_CREDENTIAL.test(arg);
}

/** Credentials written into a message by a library: `Bearer x`, `Basic x`, `user:pass@` in a URL, provider key shapes. */
export function scrubText(text: string): string {
  if (!MAY_HOLD_CREDENTIAL.test(text)) return text;
  return text
    .replace(/\b(bearer|basic)\s+[^\s"',;]+/gi, `$1 ${CENSOR}`)
    .replace(/\/\/([^:@/\s]+):[^@/\s]*@/g, '//$1:***@')
    .replace(/\b(sk|gwk|gwm|whsec)([-_])[A-Za-z0-9_-]{8,}/g, `$1$2${CENSOR}`)
    .replace(/\bAIza[0-9A-Za-z_-]{20,}/g, CENSOR);
}

/**
 * A log object with nothing to cut: only strings, numbers, booleans and nulls, under names
 * that are not sensitive, with no text that may hold a credential (an access line, most lines).
 * It is written as it is, without the copy the walk makes.
 */
function isFlatAndClean(object: Record<string, unknown>): boolean {
  for (const key in object) {
    const value = object[key];
    if (typeof value === 'object' && value !== null) return false;
    if (typeof value === 'string' && MAY_HOLD_CREDENTIAL.test(value)) return false;
    if (isSensitive(key)) return false;
  }
  return true;
}

export type ErrorSummary = { type: string; message: string; code?: string | number; stack?: string; cause?: ErrorSummary };

function isSummary(value: unknown): value is ErrorSummary {
  if (!value || typeof value !== 'object' || value instanceof Error) return false;
  const v = value as Record<string, unknown>;
  return typeof v.type === 'string' && typeof v.message === 'string' && Object.keys(v).every((k) => ['type', 'message', 'code', 'stack', 'cause'].includes(k));
}

/**
 * What a log line keeps of an error: its type, message, code and stack frames, and the same of
 * its cause. Never its other properties: an HTTP client's error carries the request's options
 * and headers, a query error its parameters.
 */
export function errorSummary(err: unknown, depth = 0): ErrorSummary {
  if (isSummary(err)) return Object.assign({}, err, { message: scrubText(err.message) });
  if (!(err instanceof Error)) return { type: typeof err, message: scrubText(String(err)).slice(0, 500) };
  const e = err as Error & { code?: unknown; query?: unknown; params?: unknown };
  // Drizzle's query error says its parameters in its message; keep the statement only.
  const message = typeof e.query === 'string' && Array.isArray(e.params) ? `Failed query: ${e.query}` : e.message;
  const summary: ErrorSummary = { type: e.name || e.constructor?.name || 'Error', message: scrubText(message).slice(0, 2000) };
  if (typeof e.code === 'string' || typeof e.code === 'number') summary.code = e.code;
  // The stack's first lines repeat the message; keep the frames.
  const frames = e.stack?.split('\n').filter((l) => /^\s+at /.test(l));
  if (frames && frames.length > 0) summary.stack = frames.slice(0, 20).join('\n');
  if (e.cause !== undefined && depth < 3) summary.cause = errorSummary(e.cause, depth + 1);
  return summary;
}

/** Log lines are written in chunks of about this size, not one write per line. */
const LOG_BUFFER_BYTES = 4096;

export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info', name = 'gw', destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    name,
    level,
    // No pino `redact` paths: the walk censors those names at any depth already.
    serializers: { err: errorSummary, error: errorSummary },
    formatters: { log: (object) => (isFlatAndClean(object) ? object : (redactDeep(object) as Record<string, unknown>)) },
    hooks: {
      // Messages are scrubbed too; an error logged alone gives its scrubbed message.
      logMethod(args, method) {
        const [first, ...rest] = args as unknown[];
        if (first instanceof Error && typeof rest[0] !== 'string') {
          return method.call(this, { err: first }, scrubText(first.message));
        }
        if (!args.some(mayHoldCredential)) return method.apply(this, args);
        const scrubbed = args.map((a) => (typeof a === 'string' ? scrubText(a) : a)) as Parameters<typeof method>;
        return method.apply(this, scrubbed);
      },
    },
  };
  // Lines are buffered and written asynchronously (pino flushes the buffer when the process
  // exits): a synchronous write per request is the largest single cost on the hot path.
  return pino(options, destination ?? pino.destination({ dest: 1, sync: false, minLength: LOG_BUFFER_BYTES }));
}
