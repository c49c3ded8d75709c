/**
 * The money soak's traffic (bench/soak-money.ts): a seeded mix of every kind of call whose
 * money the ledger must count, with the client behaviours that cut calls short. Every request
 * states an output cap, so each one's worst case is bounded (MAX_WORST_CASE_USD).
 */
import type { SoakOrg, Sent } from '../soak-money';

/** A seeded random source (an LCG), so a run can be repeated. */
export function seeded(seed: number): () => number {
  let s = (seed * 2654435761) >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

export type OpContext = { apiUrl: string; org: SoakOrg; key: string; record: Sent; also?: (op: string) => Sent };
export type Op = { name: string; org: number; key: number; pick(n: number): number; run(ctx: OpContext): Promise<void> };

/**
 * The dearest call of the mix at its cap: o3-mini with 3,000 output tokens ($4.40 a million)
 * and its prompt, or a 256x256 DALL-E 2 image ($0.016). The limit check allows this much for
 * each attempt beyond the first that the gateway cut (docs/decisions.md, "The bounds").
 */
export const MAX_WORST_CASE_USD = 0.02;

type Send = { path: string; body: unknown; stream?: boolean; hangUpAfterChunks?: number; abortAfterMs?: number; headers?: Record<string, string> };

/** One request as a client sends it; what it saw goes in `record`. Answers the parsed JSON of a whole answer. */
async function send(ctx: OpContext, s: Send, record: Sent = ctx.record): Promise<Record<string, unknown> | null> {
  const controller = new AbortController();
  const timer = s.abortAfterMs ? setTimeout(() => {
    record.hungUp = true;
    controller.abort();
  }, s.abortAfterMs) : null;
  try {
    const res = await fetch(`${ctx.apiUrl}${s.path}`, {
      method: 'POST', signal: controller.signal,
      headers: { authorization: `Bearer ${ctx.key}`, 'content-type': 'application/json', ...s.headers },
      // The sandbox keeps the tag on the bill line: a call whose answer never came is still known by it.
      body: JSON.stringify(s.body).replace('[sandbox ', `[sandbox tag=${record.tag} `),
    });
    record.requestId = res.headers.get('x-gw-request-id');
    record.status = res.status;
    if (s.stream && s.hangUpAfterChunks !== undefined && res.body) {
      const reader = res.body.getReader();
      for (let i = 0; i < s.hangUpAfterChunks; i++) if ((await reader.read()).done) return null;
      record.hungUp = true;
      await reader.cancel();
      return null;
    }
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      if (!record.hungUp) record.broken = true;
      throw err;
    }
    try {
      return JSON.parse(text) as Record<string, unknown>;
    } catch {
      return null;
    }
  } finally {
    if (timer) clearTimeout(timer);
  }
}

const chat = (model: string, content: string, extra: Record<string, unknown> = {}) => ({ model, max_tokens: 100, messages: [{ role: 'user', content }], ...extra });

type Kind = { name: string; weight: number; keys?: number[]; run(ctx: OpContext, r: () => number): Promise<void> };

const KINDS: Kind[] = [
  { name: 'chat', weight: 10, run: (ctx, r) => send(ctx, { path: '/v1/chat/completions', body: chat('openai/gpt-4o-mini', `Tell me [sandbox words=${5 + Math.floor(r() * 60)} cached=${Math.floor(r() * 3)}]`) }).then(() => undefined) },
  { name: 'chat-stream', weight: 8, run: (ctx, r) => send(ctx, { path: '/v1/chat/completions', stream: true, body: chat('openai/gpt-4o-mini', `Stream [sandbox words=${10 + Math.floor(r() * 60)}]`, { stream: true, stream_options: { include_usage: true } }) }).then(() => undefined) },
  {
    name: 'reasoning-stream-left', weight: 6,
    run: (ctx, r) => send(ctx, { path: '/v1/chat/completions', stream: true, hangUpAfterChunks: 1 + Math.floor(r() * 3), body: chat('openai/o3-mini', `Think [sandbox words=200 reasoning=${500 + Math.floor(r() * 1500)}]`, { stream: true, max_tokens: 3000 }) }).then(() => undefined),
  },
  { name: 'reasoning', weight: 4, run: (ctx, r) => send(ctx, { path: '/v1/chat/completions', body: chat('openai/o3-mini', `Think [sandbox words=40 reasoning=${200 + Math.floor(r() * 800)}]`, { max_tokens: 3000 }) }).then(() => undefined) },
  {
    name: 'messages-native', weight: 6,
    run: (ctx, r) => {
      const stream = r() < 0.5;
      const body = { model: 'anthropic/claude-3-5-haiku-latest', max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 1024 }, stream, messages: [{ role: 'user', content: `Hello there friend [sandbox cache_write=2 cache_write_1h=1 reasoning=${Math.floor(r() * 400)}]` }] };
      return send(ctx, { path: '/v1/messages', stream, body, headers: { 'anthropic-version': '2023-06-01' }, ...(stream && r() < 0.4 && { hangUpAfterChunks: 2 }) }).then(() => undefined);
    },
  },
  { name: 'messages-translated', weight: 4, run: (ctx) => send(ctx, { path: '/v1/messages', body: { model: 'openai/gpt-4o-mini', max_tokens: 100, messages: [{ role: 'user', content: 'Hi [sandbox words=12]' }] }, headers: { 'anthropic-version': '2023-06-01' } }).then(() => undefined) },
  {
    name: 'responses-stored', weight: 4,
    run: async (ctx) => {
      const first = await send(ctx, { path: '/v1/responses', body: { model: 'openai/gpt-4o-mini', input: 'First [sandbox words=10]', store: true, max_output_tokens: 100 } });
      if (!first || typeof first.id !== 'string' || !ctx.also) return;
      await send(ctx, { path: '/v1/responses', body: { model: 'openai/gpt-4o-mini', input: 'And then [sandbox words=10]', previous_response_id: first.id, store: true, max_output_tokens: 100 } }, ctx.also('responses-continued'));
    },
  },
  { name: 'embeddings', weight: 4, run: (ctx) => send(ctx, { path: '/v1/embeddings', body: { model: 'openai/text-embedding-3-small', input: ['one two three', 'four five', 'six'] } }).then(() => undefined) },
  { name: 'image', weight: 2, run: (ctx) => send(ctx, { path: '/v1/images/generations', body: { model: 'openai/dall-e-2', prompt: 'a fox', size: '256x256' } }).then(() => undefined) },
  { name: 'speech', weight: 2, run: (ctx) => send(ctx, { path: '/v1/audio/speech', body: { model: 'openai/tts-1', input: 'The quick brown fox jumps over the dog.', voice: 'alloy', response_format: 'wav' } }).then(() => undefined) },
  {
    name: 'decision', weight: 4,
    run: (ctx, r) => send(ctx, { path: `/v1/decisions/${ctx.org.decision}`, body: { input: `Ticket about billing${r() < 0.3 ? ' [sandbox delay_ms=1400]' : ''}` } }).then(() => undefined),
  },
  // The connection's 1.5 s timeout cuts the call while the sandbox works on it; retried once, cut again.
  { name: 'cut-by-timeout', weight: 2, run: (ctx) => send(ctx, { path: '/v1/chat/completions', body: chat('openai/gpt-4o-mini', 'Slow [sandbox delay_ms=2500]') }).then(() => undefined) },
  { name: 'failover', weight: 3, run: (ctx) => send(ctx, { path: '/v1/chat/completions', body: chat(ctx.org.route, 'Route me [sandbox words=8]') }).then(() => undefined) },
  { name: 'cache-hit', weight: 3, run: (ctx) => send(ctx, { path: '/v1/chat/completions', body: chat('openai/gpt-4o-mini', 'The same question every time') }).then(() => undefined) },
  { name: 'gemini', weight: 3, run: (ctx, r) => send(ctx, { path: '/v1/chat/completions', body: chat('google/gemini-2.0-flash', `Gem [sandbox words=20 reasoning=${Math.floor(r() * 50)}]`, { max_tokens: 200 }) }).then(() => undefined) },
  // The client gives up before any answer while the model works.
  { name: 'client-gone-early', weight: 2, run: (ctx) => send(ctx, { path: '/v1/chat/completions', abortAfterMs: 300, body: chat('openai/gpt-4o-mini', 'Wait [sandbox delay_ms=900]') }).then(() => undefined) },
  {
    name: 'video', weight: 2, keys: [1, 2],
    run: async (ctx, r) => {
      const created = await send(ctx, { path: '/v1/videos', body: { model: 'openai/sora-2', prompt: `a wave [sandbox render_ms=${500 + Math.floor(r() * 1500)}] ${r()}`, duration_seconds: 4 } });
      const id = typeof created?.id === 'string' ? created.id : null;
      if (!id) return;
      ctx.record.jobId = id;
      if (r() < 0.25) {
        await new Promise((res) => setTimeout(res, 400));
        await fetch(`${ctx.apiUrl}/v1/jobs/${id}/cancel`, { method: 'POST', headers: { authorization: `Bearer ${ctx.key}` } }).then((res) => res.text()).catch(() => undefined);
      }
    },
  },
];

const TOTAL = KINDS.reduce((n, k) => n + k.weight, 0);

/** The seed's sequence of operations, and how to wait for what they left running. */
export function soakPlan(seed: number) {
  const r = seeded(seed);
  return {
    next(_index: number): Op {
      let x = r() * TOTAL;
      const kind = KINDS.find((k) => (x -= k.weight) < 0) ?? KINDS[0]!;
      const keys = kind.keys ?? [0, 0, 1, 2];
      const key = keys[Math.floor(r() * keys.length)]!;
      const own = seeded(Math.floor(r() * 2 ** 31));
      return { name: kind.name, org: Math.floor(r() * 3), key, pick: (n) => Math.floor(own() * n), run: (ctx) => kind.run(ctx, own) };
    },
    /** Waits for every video job to end (at most 120 s): each read with its own key. */
    async drain(input: { apiUrl: string; orgs: SoakOrg[]; sent: Sent[] }): Promise<void> {
      const pending = input.sent.filter((s) => s.jobId);
      const deadline = Date.now() + 120_000;
      while (pending.length > 0 && Date.now() < deadline) {
        const s = pending[0]!;
        const key = input.orgs[s.org]!.keys[s.key]!.secret;
        const job = await fetch(`${input.apiUrl}/v1/jobs/${s.jobId}`, { headers: { authorization: `Bearer ${key}` } }).then((res) => res.json() as Promise<{ status?: string }>).catch(() => ({}) as { status?: string });
        if (['succeeded', 'failed', 'canceled'].includes(job.status ?? '')) pending.shift();
        else await new Promise((res) => setTimeout(res, 250));
      }
    },
  };
}
