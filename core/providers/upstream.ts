import { errors as undiciErrors, FormData, request, type Agent, type Dispatcher } from 'undici';
import { createGuardedDispatcher, GUARDED_ADDRESS_CODE, isGuardedAddressError } from '../net/guarded-dispatcher';
import { credentialHeaders, type ProviderKind } from './kinds';
import type { ProviderAdapter, ProviderFailure, UpstreamRequest } from './types';

/** One connection as the call path needs it: where, with which credentials, how long. */
export type UpstreamTarget = {
  kind: ProviderKind;
  /** The base URL, then the alternates tried in order when a host is unreachable. */
  baseUrls: string[];
  /** The credential, then pooled fallbacks tried when an earlier one is rejected or rate-limited. */
  secrets: string[];
  timeoutMs: number;
  /**
   * The gateway request this call serves, sent as `X-Client-Request-Id` (OpenAI's header for a
   * caller's own id, which it keeps with the request; other providers ignore it): what joins a
   * provider's records of a call, and the sandbox's bill, to the request log and the ledger.
   */
  requestId?: string;
};

export type UpstreamSuccess = { ok: true; status: number; headers: Record<string, string | string[] | undefined>; body: Dispatcher.ResponseData['body']; baseUrl: string };
export type UpstreamFailure = { ok: false; failure: ProviderFailure };

/**
 * The keep-alive pools, one per upstream origin (undici's Agent keeps a pool per origin),
 * behind the guarded connector: non-public hosts are refused unless the deployment allows them.
 */
export function createUpstreamAgent(options: { allowPrivateNetwork: boolean }): Agent {
  return createGuardedDispatcher({
    allowPrivateNetwork: options.allowPrivateNetwork,
    connectTimeoutMs: 10_000,
    agentOptions: { keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000, connections: 256 },
  });
}

/** Connection failures that happen before anything is sent: the provider surely saw nothing. */
const NOTHING_SENT_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', GUARDED_ADDRESS_CODE, 'UND_ERR_CONNECT_TIMEOUT']);
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', GUARDED_ADDRESS_CODE, 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_SOCKET', 'EPIPE']);

/** What every upstream request accepts: a JSON answer or an event stream (or a provider's own). */
const ACCEPT = 'application/json, text/event-stream, */*';

function isConnectionError(err: unknown): boolean {
  const e = err as { code?: string; cause?: { code?: string } };
  return CONNECTION_CODES.has(e.code ?? '') || CONNECTION_CODES.has(e.cause?.code ?? '') || isGuardedAddressError(err) || err instanceof undiciErrors.SocketError || err instanceof undiciErrors.ConnectTimeoutError;
}

async function readBody(body: Dispatcher.ResponseData['body']): Promise<unknown> {
  const text = await body.text().catch(() => '');
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Aborts a call whose answer did not begin in time (a timer's argument: no closure per call). */
function abortOnTimeout(timeout: AbortController): void {
  timeout.abort();
}

/** The URL of one try: the path under the base URL, or the absolute URL the provider handed back. */
function urlOf(baseUrl: string, upstream: UpstreamRequest, absolute: boolean): string | URL {
  const text = absolute ? upstream.path : `${baseUrl.endsWith('/') ? baseUrl.replace(/\/+$/, '') : baseUrl}${upstream.path}`;
  if (!upstream.query) return text;
  const url = new URL(text);
  for (const [k, v] of Object.entries(upstream.query)) url.searchParams.set(k, v);
  return url;
}

function hostOf(url: string | URL): string {
  return (typeof url === 'string' ? new URL(url) : url).host;
}

/**
 * Sends one request to a connection: through its alternate hosts when one is unreachable and
 * its pooled credentials when one is rejected or rate-limited. Answers the 2xx response with
 * its body unread (a stream, maybe), or the classified failure of the last try.
 *
 * `signal`, when given, aborts the call (a client that left a stream); a whole answer once sent
 * has none. Each try has one AbortController, for its timeout, which the caller's signal is
 * forwarded into: no `AbortSignal.any`, which costs a composite signal and weak references a call.
 */
export async function sendUpstream(
  agent: Agent,
  adapter: Pick<ProviderAdapter, 'classifyError'>,
  target: UpstreamTarget,
  upstream: UpstreamRequest,
  signal?: AbortSignal,
): Promise<UpstreamSuccess | UpstreamFailure> {
  let last: ProviderFailure = { kind: 'connection', message: 'no host to call' };
  const absolute = /^https?:\/\//.test(upstream.path);
  for (const [secretIndex, secret] of target.secrets.entries()) {
    for (const baseUrl of target.baseUrls) {
      const url = urlOf(baseUrl, upstream, absolute);
      // A URL the provider handed back (a file to download) gets the credential only when it
      // is on one of the connection's own hosts.
      const credentialed = !absolute || target.baseUrls.some((b) => new URL(b).host === hostOf(url));
      // The timeout covers the wait for the answer to begin; after that, `bodyTimeout` bounds
      // each pause, so a long stream is not cut for being long.
      const timeout = new AbortController();
      const timer = setTimeout(abortOnTimeout, target.timeoutMs, timeout);
      const forward = signal ? () => timeout.abort(signal.reason) : null;
      if (signal && forward) {
        if (signal.aborted) timeout.abort(signal.reason);
        else signal.addEventListener('abort', forward, { once: true });
      }
      try {
        const method = upstream.method ?? 'POST';
        // undici writes a form's own content type (with its boundary) and length.
        const form = upstream.body instanceof FormData ? upstream.body : null;
        const res = await request(url, {
          method,
          dispatcher: agent,
          headers: Object.assign(
            method === 'POST' && !form ? { 'content-type': 'application/json', accept: ACCEPT } : { accept: ACCEPT },
            upstream.headers,
            credentialed ? credentialHeaders(target.kind, secret) : undefined,
            target.requestId && !absolute ? { 'x-client-request-id': target.requestId } : undefined,
          ),
          body: method !== 'POST' ? undefined : form ?? JSON.stringify(upstream.body ?? {}),
          signal: timeout.signal,
          headersTimeout: target.timeoutMs,
          bodyTimeout: target.timeoutMs,
        });
        if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, status: res.statusCode, headers: res.headers, body: res.body, baseUrl };
        last = adapter.classifyError(res.statusCode, await readBody(res.body), res.headers);
        // Only a refused or rate-limited credential moves on to the next pooled one.
        if ((last.kind === 'credential' || last.kind === 'rate_limit') && secretIndex < target.secrets.length - 1) break;
        return { ok: false, failure: last };
      } catch (err) {
        if (signal?.aborted) throw err;
        if (timeout.signal.aborted || (err as { code?: string }).code === 'UND_ERR_HEADERS_TIMEOUT') {
          return { ok: false, failure: { kind: 'timeout', message: `no answer within ${target.timeoutMs} ms`, outcomeUnknown: true } };
        }
        if (!isConnectionError(err)) return { ok: false, failure: { kind: 'connection', message: (err as Error).message, outcomeUnknown: true } };
        const code = (err as { code?: string }).code;
        last = { kind: 'connection', message: `${hostOf(url)} unreachable (${code ?? 'error'})`, ...(!NOTHING_SENT_CODES.has(code ?? '') && { outcomeUnknown: true }) };
        if (upstream.sendOnce && last.outcomeUnknown) return { ok: false, failure: last };
        // Next alternate host.
      } finally {
        clearTimeout(timer);
      }
    }
    if (last.kind === 'connection') return { ok: false, failure: last };
  }
  return { ok: false, failure: last };
}
