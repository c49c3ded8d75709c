import { startSandbox, type Sandbox } from '../../sandbox/server';
import { randomClientAddress } from './harness';
import { startManagementFixture, type ManagementFixture } from './manage-client';

/** A parsed JSON answer, read loosely: tests assert on its shape. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are checked field by field
export type Loose = Record<string, any>;

/** Where each kind's wire lives on the sandbox. */
export function sandboxPath(kind: string): string {
  switch (kind) {
    case 'anthropic': return 'anthropic/v1';
    case 'google': return 'google/v1beta';
    case 'azure_openai': return 'azure/openai';
    default: return 'openai/v1';
  }
}

/** A gateway answer: status, headers, parsed JSON (empty for a stream) or raw text, and its request id. */
export type Answer = { status: number; headers: Headers; json: Loose; text: string; id: string };

export type ChatFixture = ManagementFixture & {
  sandbox: Sandbox;
  /** Creates a provider connection on the sandbox; `directives` choose its failures. */
  connect(kind: string, options?: { directives?: string; name?: string; secret?: string; extra?: Record<string, unknown> }): Promise<string>;
  /** A gateway key of the tenant's project with these settings. */
  key(settings?: Record<string, unknown>): Promise<string>;
  /**
   * A route to one connection's model whose batches the gateway runs itself (`batch_mode:
   * gateway`): for tests of the gateway-run path on a provider that has a batch API.
   */
  gatewayRunRoute(connectionId: string, model: string, slug: string): Promise<string>;
  /** POST /v1/chat/completions with a key; answers status, headers and parsed JSON or raw text. */
  chat(secret: string, body: Record<string, unknown>, headers?: Record<string, string>): Promise<Answer>;
  /** POST to a gateway path with these headers (the key among them, in whichever form); the answer as `chat` reads it. */
  post(path: string, body: Record<string, unknown>, headers: Record<string, string>): Promise<Answer>;
  settle(): Promise<void>;
};

let seq = 0;

/** A real API on the sandbox providers (private network allowed, as in development). */
export async function startChatFixture(env: Record<string, string> = {}, options: { operator?: boolean } = {}): Promise<ChatFixture> {
  const sandbox = await startSandbox();
  const fixture = await startManagementFixture({ env: { GW_ALLOW_PRIVATE_NETWORK: 'true', ...env }, operator: options.operator });
  const settle = () => new Promise<void>((r) => setTimeout(r, 150));
  async function post(path: string, body: Record<string, unknown>, headers: Record<string, string>): Promise<Answer> {
    const res = await fetch(`${fixture.api.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress(), ...headers },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    let json: Loose = {};
    try {
      json = JSON.parse(text);
    } catch {
      // A stream: callers read `text`.
    }
    return { status: res.status, headers: res.headers, json, text, id: res.headers.get('x-gw-request-id')! };
  }
  return {
    ...fixture,
    sandbox,
    settle,
    async connect(kind, options = {}) {
      const prefix = options.directives ? `/x/${options.directives}` : '';
      const res = await fixture.client.post<{ id: string }>('/provider_connections', {
        kind,
        name: options.name ?? `${kind} ${Date.now()} ${seq++}`,
        secret: options.secret ?? 'sk-sandbox-test',
        config: { base_url: `${sandbox.url}${prefix}/${sandboxPath(kind)}` },
        ...options.extra,
      });
      if (res.status !== 201) throw new Error(`connection refused: ${JSON.stringify(res.body)}`);
      await settle();
      return res.body.id;
    },
    async gatewayRunRoute(connectionId, model, slug) {
      const res = await fixture.client.post('/routes', { slug, targets: [{ connection_id: connectionId, model }], batch_mode: 'gateway' });
      if (res.status !== 201) throw new Error(`route refused: ${JSON.stringify(res.body)}`);
      await settle();
      return slug;
    },
    async key(settings = {}) {
      const res = await fixture.client.post<{ secret: string }>('/gateway_keys', { label: `k${seq++}`, project_id: fixture.tenant.projectId, ...settings });
      if (res.status !== 201) throw new Error(`key refused: ${JSON.stringify(res.body)}`);
      return res.body.secret;
    },
    chat(secret, body, headers = {}) {
      return post('/v1/chat/completions', body, { authorization: `Bearer ${secret}`, ...headers });
    },
    post,
    async close() {
      await fixture.close();
      await sandbox.close();
    },
  };
}

/** The data events of an SSE answer, parsed where they are JSON. */
export function sseData(text: string): Array<Loose | string> {
  return text.split('\n\n').filter((b) => b.startsWith('data: ')).map((b) => {
    const data = b.slice(6);
    try {
      return JSON.parse(data) as Loose;
    } catch {
      return data;
    }
  });
}

/** The named events of an SSE answer (`event:` and `data:`, as Anthropic's and OpenAI Responses' streams send them), parsed. */
export function namedEvents(text: string): Array<{ event: string; data: Loose }> {
  return text.split('\n\n').filter(Boolean).map((block) => {
    const [eventLine, dataLine] = block.split('\n');
    return { event: eventLine!.slice('event: '.length), data: JSON.parse(dataLine!.slice('data: '.length)) as Loose };
  });
}
