import { request, type Dispatcher } from 'undici';
import { isGuardedAddressError } from '../net/guarded-dispatcher';
import { credentialHeaders, kindSpec, type ProviderKind } from './kinds';

export type CredentialCheck =
  | { outcome: 'accepted' }
  | { outcome: 'rejected'; status: number }
  | { outcome: 'unreachable'; detail: string };

/** The time a credential check may take, whatever the connection's own timeout. */
export const CREDENTIAL_CHECK_TIMEOUT_MS = 10_000;

/**
 * Proves a credential with the provider by listing its models, the cheapest authenticated
 * call every kind has. 400, 401 and 403 mean the provider refused the credential; anything else
 * that is not 2xx, or no answer at all, means we could not tell. `dispatcher` is the guarded
 * one (core/net): the base URL is the customer's, so a non-public host is refused, not called.
 */
export async function checkProviderCredential(
  dispatcher: Dispatcher,
  kind: ProviderKind,
  baseUrl: string,
  secret: string,
  timeoutMs = CREDENTIAL_CHECK_TIMEOUT_MS,
): Promise<CredentialCheck> {
  const url = `${baseUrl.replace(/\/+$/, '')}${kindSpec(kind).validationPath}`;
  try {
    const res = await request(url, {
      method: 'GET',
      dispatcher,
      headers: { accept: 'application/json', ...credentialHeaders(kind, secret) },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    await res.body.dump();
    if (res.statusCode >= 200 && res.statusCode < 300) return { outcome: 'accepted' };
    // A bare model listing can only be refused for its credential; Gemini says so with a 400.
    if (res.statusCode === 400 || res.statusCode === 401 || res.statusCode === 403) return { outcome: 'rejected', status: res.statusCode };
    return { outcome: 'unreachable', detail: `HTTP ${res.statusCode}` };
  } catch (err) {
    if (isGuardedAddressError(err)) return { outcome: 'unreachable', detail: 'the host is not a public address' };
    return { outcome: 'unreachable', detail: (err as { code?: string }).code ?? 'no answer' };
  }
}
