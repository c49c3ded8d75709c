/**
 * The console's one way to the API: `/manage/v1` with the management token held in session
 * storage (never in a URL, never in a cookie). Every answer is JSON or the spec's error body.
 */
const TOKEN_KEY = 'gw.console.token';

export const session = {
  token: (): string | null => sessionStorage.getItem(TOKEN_KEY),
  signIn: (token: string) => sessionStorage.setItem(TOKEN_KEY, token),
  signOut: () => sessionStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(readonly status: number, readonly type: string, readonly code: string | null, message: string) {
    super(message);
  }
  /** The token lacks the scope (or the organization the plan) for this read or write. */
  get forbidden(): boolean {
    return this.status === 403;
  }
}

export type ApiAnswer<T> = { body: T; etag: string | null };

export async function api<T>(method: string, path: string, options: { body?: unknown; ifMatch?: string; idempotencyKey?: string } = {}): Promise<ApiAnswer<T>> {
  const headers: Record<string, string> = { authorization: `Bearer ${session.token() ?? ''}` };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.ifMatch) headers['if-match'] = options.ifMatch;
  if (options.idempotencyKey) headers['idempotency-key'] = options.idempotencyKey;
  const res = await fetch(`/manage/v1${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
  const text = await res.text();
  const body = text ? JSON.parse(text) : null;
  if (!res.ok) {
    const error = body?.error ?? {};
    throw new ApiError(res.status, error.type ?? 'api_error', error.code ?? null, error.message ?? `${method} ${path} answered ${res.status}`);
  }
  return { body: body as T, etag: res.headers.get('etag') };
}

export const get = <T>(path: string) => api<T>('GET', path).then((a) => a.body);

/** A list page as the API answers it (spec list envelope). */
export type ListPage<T> = { object: 'list'; data: T[]; has_more: boolean; next_cursor: string | null };

/** Query text from a record, leaving out empty values. */
export function query(params: Record<string, string | number | undefined | null>): string {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') search.set(k, String(v));
  const text = search.toString();
  return text ? `?${text}` : '';
}
