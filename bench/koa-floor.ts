/**
 * The stack's floor (`BENCH_SUBJECTS=...,koa_floor`): the least a chat gateway built on this
 * project's stack does for one request, in its own process
 * (`node --import tsx bench/koa-floor.ts <port> <upstream origin>`; prints `listening <port>`).
 *
 * It does what no gateway that reads the request can skip:
 * - Koa with @koa/router, as the API runs them;
 * - the JSON body read and parsed;
 * - `model` and `messages` checked by a zod schema;
 * - the upstream body written as JSON and sent with undici;
 * - the whole answer read and parsed (its `usage` is what a gateway prices);
 * - the answer written back as JSON.
 * A stream is passed through as it comes. Nothing else: no key, no rate or spend, no routing,
 * no log line, no request-log or ledger row.
 *
 * Measured beside the bare proxy and the gateway, it splits the gateway's CPU a request into
 * what the stack costs and what the gateway's own work costs (issue 37's bars).
 */
import { PassThrough } from 'node:stream';
import Router from '@koa/router';
import Koa from 'koa';
import { Agent, request } from 'undici';
import { z } from 'zod';

const chatSchema = z.looseObject({
  model: z.string().min(1),
  messages: z.array(z.looseObject({ role: z.string(), content: z.unknown() })).min(1),
  stream: z.boolean().optional(),
});

async function readJson(req: NodeJS.ReadableStream): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

export function createKoaFloor(upstream: string): Koa {
  const agent = new Agent({ keepAliveTimeout: 60_000, connections: null });
  const app = new Koa();
  const router = new Router();
  const chat = (prefix: string) => async (ctx: Koa.Context) => {
    const body = chatSchema.parse(await readJson(ctx.req));
    const answer = await request(`${upstream}${prefix}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: ctx.get('authorization') },
      body: JSON.stringify(body),
      dispatcher: agent,
    });
    ctx.status = answer.statusCode;
    if (body.stream) {
      ctx.type = 'text/event-stream';
      const out = new PassThrough();
      answer.body.pipe(out);
      ctx.body = out;
      return;
    }
    ctx.body = JSON.stringify(await answer.body.json());
    ctx.type = 'application/json';
  };
  router.post('/v1/chat/completions', chat(''));
  router.post('/delay20/v1/chat/completions', chat('/delay20'));
  app.use(router.routes());
  return app;
}

if (require.main === module) {
  const upstream = process.argv[3];
  if (!upstream) throw new Error('usage: koa-floor.ts <port> <upstream origin>');
  const server = createKoaFloor(upstream.replace(/\/+$/, '')).listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
    console.log(`listening ${(server.address() as { port: number }).port}`);
  });
  server.keepAliveTimeout = 60_000;
}
