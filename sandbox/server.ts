import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The provider simulator: real HTTP speaking each provider's wire format. Each provider lives
 * under its own path prefix, so one sandbox stands in for all of them:
 *   /openai/v1      OpenAI and OpenAI-compatible kinds (Bearer)
 *   /anthropic/v1   Anthropic (x-api-key, anthropic-version)
 *   /google/v1beta  Gemini (x-goog-api-key)
 *
 * Credentials: any secret starting with `sk-sandbox` is accepted; any other is refused the
 * way the provider refuses it. This file grows the chat, stream and video surfaces with the
 * issues that use them.
 */
export const SANDBOX_SECRET_PREFIX = 'sk-sandbox';

type Flavor = 'openai' | 'anthropic' | 'google';

const MODELS: Record<Flavor, string[]> = {
  openai: ['gpt-4o-mini', 'gpt-4o'],
  anthropic: ['claude-3-5-haiku-latest', 'claude-sonnet-4-5'],
  google: ['gemini-2.0-flash', 'gemini-2.5-pro'],
};

function credentialOf(flavor: Flavor, req: http.IncomingMessage): string | undefined {
  if (flavor === 'anthropic') return req.headers['x-api-key'] as string | undefined;
  if (flavor === 'google') return (req.headers['x-goog-api-key'] as string | undefined) ?? new URL(req.url ?? '/', 'http://x').searchParams.get('key') ?? undefined;
  const auth = req.headers.authorization;
  return auth?.startsWith('Bearer ') ? auth.slice(7) : undefined;
}

/** Each provider's own refusal body for a bad credential. */
function unauthorized(flavor: Flavor): [number, unknown] {
  switch (flavor) {
    case 'anthropic':
      return [401, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } }];
    case 'google':
      return [400, { error: { code: 400, message: 'API key not valid. Please pass a valid API key.', status: 'INVALID_ARGUMENT' } }];
    default:
      return [401, { error: { message: 'Incorrect API key provided.', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } }];
  }
}

function modelList(flavor: Flavor): unknown {
  const ids = MODELS[flavor];
  if (flavor === 'anthropic') {
    return { data: ids.map((id) => ({ type: 'model', id, display_name: id, created_at: '2025-01-01T00:00:00Z' })), has_more: false, first_id: ids[0], last_id: ids.at(-1) };
  }
  if (flavor === 'google') return { models: ids.map((id) => ({ name: `models/${id}`, displayName: id })) };
  return { object: 'list', data: ids.map((id) => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'sandbox' })) };
}

const ROUTES: Array<{ flavor: Flavor; pattern: RegExp }> = [
  { flavor: 'openai', pattern: /^\/openai\/v1\/models$/ },
  { flavor: 'anthropic', pattern: /^\/anthropic\/v1\/models$/ },
  { flavor: 'google', pattern: /^\/google\/v1beta\/models$/ },
];

export type Sandbox = { url: string; close(): Promise<void> };

export async function startSandbox(port = 0, host = '127.0.0.1'): Promise<Sandbox> {
  const server = http.createServer((req, res) => {
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const path = new URL(req.url ?? '/', 'http://sandbox').pathname;
    const route = ROUTES.find((r) => r.pattern.test(path));
    if (!route || req.method !== 'GET') return send(404, { error: { message: `sandbox: no ${req.method} ${path}` } });
    const secret = credentialOf(route.flavor, req);
    if (!secret?.startsWith(SANDBOX_SECRET_PREFIX)) {
      const [status, body] = unauthorized(route.flavor);
      return send(status, body);
    }
    return send(200, modelList(route.flavor));
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${bound}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
