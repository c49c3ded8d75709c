import { request, type Dispatcher } from 'undici';
import { WEBHOOK_ANSWER_TIMEOUT_MS } from './schedule';

export const WEBHOOK_USER_AGENT = 'GW-Webhooks/1';

export type SendOutcome = { ok: boolean; status: number | null; error: string | null };

/**
 * One POST of a delivery's bytes (spec 6.3): success is a 2xx answered, body included, within
 * the answer limit. A 3xx is a failure and is never followed; so are other statuses, connection
 * and TLS errors, refused addresses and slow answers. Only the status is kept of the answer.
 */
export async function sendWebhook(
  dispatcher: Dispatcher,
  delivery: { url: string; payload: string; headers: Record<string, string> },
  timeoutMs = WEBHOOK_ANSWER_TIMEOUT_MS,
): Promise<SendOutcome> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const res = await request(delivery.url, {
      method: 'POST',
      dispatcher,
      headers: { 'content-type': 'application/json', 'user-agent': WEBHOOK_USER_AGENT, ...delivery.headers },
      body: delivery.payload,
      signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    await res.body.dump({ limit: 64 * 1024, signal });
    if (signal.aborted) return { ok: false, status: res.statusCode, error: `no complete answer within ${timeoutMs / 1000} s` };
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    return { ok, status: res.statusCode, error: ok ? null : `answered HTTP ${res.statusCode}` };
  } catch (err) {
    if (signal.aborted) return { ok: false, status: null, error: `no answer within ${timeoutMs / 1000} s` };
    return { ok: false, status: null, error: describeSendError(err) };
  }
}

/** A connection, TLS or refusal reason in a few words: no request options, no headers. */
function describeSendError(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  const code = e.cause?.code ?? e.code;
  const message = (e.cause?.message ?? e.message ?? 'request failed').split('\n')[0]!.slice(0, 200);
  return code ? `${code}: ${message}` : message;
}
