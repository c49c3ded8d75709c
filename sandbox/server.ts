import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBill, tokenUsd, videoUsd, type Bill, type BillLine, type BillUnits } from './bill';
import { planOpenAiEmbeddings } from './embeddings';
import { directivesInText, numberedWords, parseDirectives, type Directives } from './directives';
import { planTurn } from './turn';
import { createMediaState, handleMedia, isBlobPath, mediaEndpointFor, serveBlob, type ReceivedFile } from './media';
import { createVideoState, handleVideo } from './video';
import { batchRouteFor, createBatchState, handleBatch } from './batches';
import { anthropicWire } from './wire/anthropic';
import { googleWire } from './wire/google';
import { openaiWire } from './wire/openai';
import { openaiResponsesWire } from './wire/openai-responses';
import type { AnswerContext, ParsedChat, Wire } from './wire/types';

/**
 * The provider simulator: real HTTP speaking each provider's wire format, one path prefix per
 * provider, so one sandbox stands in for all of them:
 *   /openai/v1        OpenAI and every OpenAI-compatible kind (Bearer); OpenAI's Responses at /responses
 *   /azure/openai     Azure OpenAI deployments (api-key)
 *   /anthropic/v1     Anthropic Messages (x-api-key)
 *   /google/v1beta    Gemini generateContent (x-goog-api-key)
 * Images and audio (OpenAI, Azure, Imagen) are served by media.ts, videos by video.ts.
 * A `/x/<directives>` prefix before any of them chooses failures (see directives.ts).
 * Credentials: a secret starting with `sk-sandbox` is accepted; others are refused the way
 * the provider refuses them.
 */
export const SANDBOX_SECRET_PREFIX = 'sk-sandbox';

const MODELS: Record<string, string[]> = {
  openai: ['gpt-4o-mini', 'gpt-4o', 'o3-mini'],
  azure: ['gpt-4o-mini'],
  anthropic: ['claude-3-5-haiku-latest', 'claude-sonnet-4-5'],
  google: ['gemini-2.0-flash', 'gemini-2.5-pro'],
};

/**
 * An event's `data:` lines. With `multiline_data`, JSON data is indented over several lines,
 * each its own `data:` field, as the SSE format allows (a client joins them with newlines).
 */
function sseData(data: string, multiline: boolean): string {
  let text = data;
  if (multiline) {
    try {
      text = JSON.stringify(JSON.parse(data), null, 1);
    } catch {
      // Not JSON (OpenAI's `[DONE]`): sent as it is.
    }
  }
  return text.split('\n').map((line) => `data: ${line}\n`).join('');
}

function isVideoPath(path: string): boolean {
  return /^\/openai\/v1\/videos/.test(path) || /^\/google\/v1beta\/(models\/[^/]+(:predictLongRunning|\/operations\/)|files\/)/.test(path);
}

type Endpoint = { wire: Wire; flavor: BillLine['provider']; kind: 'models' | 'chat'; model?: string; stream?: boolean };

function endpointFor(method: string, path: string): Endpoint | null {
  let m: RegExpExecArray | null;
  if (method === 'GET' && path === '/openai/v1/models') return { wire: openaiWire, flavor: 'openai', kind: 'models' };
  if (method === 'POST' && path === '/openai/v1/chat/completions') return { wire: openaiWire, flavor: 'openai', kind: 'chat' };
  if (method === 'POST' && path === '/openai/v1/responses') return { wire: openaiResponsesWire, flavor: 'openai', kind: 'chat' };
  if (method === 'GET' && path === '/azure/openai/models') return { wire: openaiWire, flavor: 'azure', kind: 'models' };
  if (method === 'POST' && (m = /^\/azure\/openai\/deployments\/([^/]+)\/chat\/completions$/.exec(path))) return { wire: openaiWire, flavor: 'azure', kind: 'chat', model: decodeURIComponent(m[1]!) };
  if (method === 'GET' && path === '/anthropic/v1/models') return { wire: anthropicWire, flavor: 'anthropic', kind: 'models' };
  if (method === 'POST' && path === '/anthropic/v1/messages') return { wire: anthropicWire, flavor: 'anthropic', kind: 'chat' };
  if (method === 'GET' && path === '/google/v1beta/models') return { wire: googleWire, flavor: 'google', kind: 'models' };
  if (method === 'POST' && (m = /^\/google\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(path))) {
    return { wire: googleWire, flavor: 'google', kind: 'chat', model: decodeURIComponent(m[1]!), stream: m[2] === 'streamGenerateContent' };
  }
  return null;
}

/**
 * What reached the sandbox, so tests can check what the gateway sent upstream. A multipart
 * request's `body` is its text fields (a `name[]` field as an array) and `multipart` lists the
 * field names and each file's field, name, content-type and size (never the bytes).
 */
export type ReceivedRequest = {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown> | null;
  multipart?: { fields: string[]; files: ReceivedFile[] };
};

export type Sandbox = {
  url: string;
  received: ReceivedRequest[];
  /** Streams whose client (the gateway) went away before the stream ended. */
  abandonedStreams(): number;
  /** Chat requests held by `delay_ms` whose client (the gateway) hung up before any answer. */
  abandonedWaits(): number;
  /** SSE frames written so far, over all streams (a stream waits for `drain` when its client reads slowly). */
  framesSent(): number;
  /** Video renders created (a create replayed by Idempotency-Key does not count). */
  videoSubmits(): number;
  /** Slow video submits (`submit_delay_ms`) whose client hung up before the answer. */
  abandonedVideoSubmits(): number;
  /** Seconds of video rendered (each sample counted): what the providers would bill. */
  videoRenderedSeconds(): number;
  /** What each provider would bill, per credential and request id (sandbox/bill.ts); also at `GET /_sandbox/bill`. */
  bill: Bill;
  close(): Promise<void>;
};

async function readJson(req: http.IncomingMessage): Promise<Record<string, unknown> | null> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  if (chunks.length === 0) return null;
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
}

export async function startSandbox(port = 0, host = '127.0.0.1'): Promise<Sandbox> {
  const received: ReceivedRequest[] = [];
  const bill = createBill();
  // A render is billed for its seconds once started, whether or not anyone fetches it; a render
  // that fails is not billed (neither OpenAI nor Google bills a failed generation).
  const video = createVideoState((r, req) => {
    const google = r.model.startsWith('veo');
    bill.add({
      credential: (google ? googleWire : openaiWire).credential(req, new URL(req.url ?? '/', 'http://sandbox')), headers: req.headers,
      provider: google ? 'google' : 'openai', endpoint: google ? 'predictLongRunning' : '/openai/v1/videos',
      model: r.model, tier: null, units: { video_seconds: r.directives.videoFail ? 0 : r.seconds * r.samples },
      usd: r.directives.videoFail ? 0 : videoUsd(r.model, r.seconds * r.samples, google ? { resolution: r.size } : { size: r.size }),
    });
  });
  const media = createMediaState();
  const batchState = createBatchState(runBatchItem);
  const failuresSeen = new Map<string, number>();
  let abandoned = 0;
  let abandonedWaits = 0;
  let frames = 0;

  const server = http.createServer(async (req, res) => {
    const receivedAt = new Date();
    const url = new URL(req.url ?? '/', 'http://sandbox');
    const prefixed = /^\/x\/([^/]*)(\/.*)$/.exec(url.pathname);
    const path = prefixed ? prefixed[2]! : url.pathname;
    const send = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(payload));
    };
    // The bill, sandbox-only: a credential's lines (optionally one request id's), read with that
    // credential as a bearer token. No provider has this path; the soak and tests read it.
    if (req.method === 'GET' && path === '/_sandbox/bill') {
      const secret = /^Bearer (.+)$/.exec(String(req.headers.authorization ?? ''))?.[1];
      if (!secret) return send(401, { error: { message: 'sandbox bill: send the credential as a bearer token' } });
      const lines = bill.lines(secret, url.searchParams.get('request_id') ?? undefined);
      const priced = lines.filter((l) => l.usd !== null);
      return send(200, { lines, total_usd: priced.reduce((sum, l) => sum + l.usd!, 0), unpriced: lines.length - priced.length });
    }
    // The providers' batch wires (batches.ts) read their own bodies: JSON or multipart.
    const batchRoute = batchRouteFor(req.method ?? 'GET', path);
    if (batchRoute) {
      received.push({ path: url.pathname + url.search, headers: req.headers, body: null });
      const wire = batchRoute.wire === 'anthropic' ? anthropicWire : openaiWire;
      const credential = wire.credential(req, url);
      if (!credential?.startsWith(SANDBOX_SECRET_PREFIX)) {
        const [status, payload] = wire.unauthorized();
        return send(status, payload);
      }
      const origin = `http://${req.headers.host}${prefixed ? `/x/${prefixed[1]}` : ''}`;
      return handleBatch(batchState, batchRoute, { req, res, credential, pathDirectives: prefixed?.[1] ?? '', origin, send }).catch(() => res.destroy());
    }
    // Images and audio (media.ts) read their own bodies: JSON or multipart.
    const mediaEndpoint = mediaEndpointFor(req.method ?? 'GET', path);
    if (mediaEndpoint) {
      const record = (body: Record<string, unknown> | null, multipart?: ReceivedRequest['multipart']) => {
        received.push({ path: url.pathname + url.search, headers: req.headers, body, ...(multipart && { multipart }) });
      };
      // A client that hangs up mid-upload or mid-answer ends the exchange, never the sandbox.
      const charge = (model: string, units: BillUnits, usd: number | null) => bill.add({
        credential: mediaEndpoint.wire.credential(req, url), headers: req.headers, provider: mediaEndpoint.flavor,
        endpoint: path, model, tier: null, units, usd, receivedAt,
      });
      return handleMedia({ state: media, req, res, url, pathDirectives: prefixed?.[1] ?? '', endpoint: mediaEndpoint, record, failing, send, charge }).catch(() => res.destroy());
    }
    const body = req.method === 'POST' ? await readJson(req) : null;
    received.push({ path: url.pathname + url.search, headers: req.headers, body });
    if (isBlobPath(req.method ?? 'GET', path)) return serveBlob(media, path, url, res);

    if (isVideoPath(path)) {
      const wire = path.startsWith('/google/') ? googleWire : openaiWire;
      if (!wire.credential(req, url)?.startsWith(SANDBOX_SECRET_PREFIX)) {
        const [status, payload] = wire.unauthorized();
        return send(status, payload);
      }
      const pathDirectiveText = prefixed?.[1] ?? '';
      const directives = parseDirectives(`${pathDirectiveText},${directivesInText(JSON.stringify(body ?? {}))}`);
      if (req.method === 'POST' && failing(directives, `${pathDirectiveText}|video`)) {
        if (directives.reset) return req.socket.destroy();
        if (directives.status) return send(directives.status, wire.error(directives.status, `sandbox: simulated ${directives.status}`), directives.retryAfter ? { 'retry-after': directives.retryAfter } : {});
      }
      const origin = `http://${req.headers.host}${prefixed ? `/x/${prefixed[1]}` : ''}`;
      if (handleVideo(video, req, res, path, body, pathDirectiveText, origin, send)) return;
    }
    const endpoint = endpointFor(req.method ?? 'GET', path);
    if (!endpoint) return send(404, { error: { message: `sandbox: no ${req.method} ${path}` } });
    if (!endpoint.wire.credential(req, url)?.startsWith(SANDBOX_SECRET_PREFIX)) {
      const [status, payload] = endpoint.wire.unauthorized();
      return send(status, payload);
    }
    if (endpoint.kind === 'models') {
      // A slow model listing stands in for a slow credential check.
      const { delayMs } = parseDirectives(prefixed?.[1] ?? '');
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      return send(200, endpoint.wire.models(MODELS[endpoint.flavor] ?? []));
    }
    if (!body) return send(400, endpoint.wire.error(400, 'We could not parse the JSON body of your request.'));

    const betas = String(req.headers['anthropic-beta'] ?? '').split(',').map((b) => b.trim()).filter(Boolean);
    const parsed = endpoint.wire.parseChat(body, { model: endpoint.model, stream: endpoint.stream, betas });
    if ('invalid' in parsed) return send(400, endpoint.wire.error(400, parsed.invalid, parsed.param ? { param: parsed.param } : undefined));
    const directiveText = [prefixed?.[1] ?? '', directivesInText(parsed.promptText)].join(',');
    const directives = parseDirectives(directiveText);

    if (directives.delayMs) {
      let hungUp = false;
      const onClose = () => {
        hungUp = !res.writableFinished;
      };
      res.once('close', onClose);
      await new Promise((r) => setTimeout(r, directives.delayMs));
      res.off('close', onClose);
      if (hungUp) {
        abandonedWaits += 1;
        // The provider was working on it when its client left: it bills the answer it finishes,
        // unless the call was one it refuses anyway.
        const refused = wouldFail(directives, `${prefixed?.[1] ?? ''}|${directiveText}`) || directives.moderation || (directives.refuseParam && parsed.params.includes(directives.refuseParam));
        if (!refused) accepted(endpoint.wire.credential(req, url), req.headers, url.pathname.replace(/^\/x\/[^/]*/, ''), endpoint, parsed, directives, receivedAt);
        return;
      }
    }
    if (failing(directives, `${prefixed?.[1] ?? ''}|${directiveText}`)) {
      if (directives.reset) return req.socket.destroy();
      if (directives.status) {
        const headers: Record<string, string> = directives.retryAfter ? { 'retry-after': directives.retryAfter } : {};
        return send(directives.status, endpoint.wire.error(directives.status, `sandbox: simulated ${directives.status}`), headers);
      }
    }
    if (directives.moderation) return send(400, endpoint.wire.error(400, 'Your request was rejected as a result of our safety system.', { moderation: true }));
    if (directives.refuseParam && parsed.params.includes(directives.refuseParam)) {
      return send(400, endpoint.wire.error(400, `Unsupported parameter: '${directives.refuseParam}' is not supported with this model.`, { param: directives.refuseParam }));
    }
    // A model ignoring the structured output it was asked for, for the first `times` requests.
    const raw = directives.rawReply !== undefined && firstTimes(directives, `raw|${prefixed?.[1] ?? ''}|${directiveText}`);
    await answer(receivedAt, req, url, res, endpoint, raw ? { ...parsed, json: undefined } : parsed, raw ? { ...directives, reply: directives.rawReply } : directives);
  });

  /**
   * One request of a provider batch (batches.ts), through the chat path a direct call takes:
   * parsed, refused or failed as its directives say, answered whole, and billed at the batch
   * tier (half the standard rates), under the batch's credential and `<batch>:<custom_id>`.
   */
  function runBatchItem(input: { flavor: BillLine['provider']; path: string; body: Record<string, unknown>; credential: string; requestId: string }): { status: number; body: unknown } {
    const embeddings = mediaEndpointFor('POST', input.path);
    if (embeddings?.kind === 'embeddings') {
      const plan = planOpenAiEmbeddings(input.body, embeddings.model);
      if ('refusal' in plan) return { status: plan.refusal.status ?? 400, body: { error: { message: plan.refusal.message, type: 'invalid_request_error', param: plan.refusal.param ?? null, code: plan.refusal.code ?? null } } };
      const units = { input_tokens: plan.tokens };
      bill.add({ credential: input.credential, headers: { 'x-client-request-id': input.requestId }, provider: input.flavor, endpoint: input.path, model: plan.model, tier: 'batch', units, usd: tokenUsd(input.flavor, plan.model, units, 'batch') });
      return { status: 200, body: plan.answer };
    }
    const endpoint = endpointFor('POST', input.path);
    if (!endpoint || endpoint.kind !== 'chat') return { status: 404, body: { error: { message: `sandbox: no batch path ${input.path}` } } };
    const parsed = endpoint.wire.parseChat({ ...input.body, stream: false }, { model: endpoint.model });
    if ('invalid' in parsed) return { status: 400, body: endpoint.wire.error(400, parsed.invalid, parsed.param ? { param: parsed.param } : undefined) };
    const directiveText = directivesInText(parsed.promptText);
    const directives = parseDirectives(directiveText);
    if (failing(directives, `batch|${directiveText}`) && directives.status) return { status: directives.status, body: endpoint.wire.error(directives.status, `sandbox: simulated ${directives.status}`) };
    if (directives.moderation) return { status: 400, body: endpoint.wire.error(400, 'Your request was rejected as a result of our safety system.', { moderation: true }) };
    const ctx = accepted(input.credential, { 'x-client-request-id': input.requestId }, input.path, endpoint, { ...parsed, stream: false }, directives, new Date(), 'batch');
    return { status: 200, body: endpoint.wire.answer(ctx) };
  }

  /** Whether this request is one of the first `times` with these directives (all, without `times`). */
  function firstTimes(d: Directives, key: string): boolean {
    if (d.times === undefined) return true;
    const seen = failuresSeen.get(key) ?? 0;
    failuresSeen.set(key, seen + 1);
    return seen < d.times;
  }

  function failing(d: Directives, key: string): boolean {
    return (Boolean(d.status) || d.reset === true) && firstTimes(d, key);
  }

  /** Whether `failing` would answer true, without counting the request against `times`. */
  function wouldFail(d: Directives, key: string): boolean {
    return (Boolean(d.status) || d.reset === true) && (d.times === undefined || (failuresSeen.get(key) ?? 0) < d.times);
  }

  /**
   * A call the model takes on: its turn, billed now for the whole answer, however much of it
   * the client reads (a provider bills the work it did, and finishes it when its client leaves).
   */
  function accepted(credential: string | undefined, headers: http.IncomingHttpHeaders, billedPath: string, endpoint: Endpoint, parsed: ParsedChat, directives: Directives, receivedAt: Date, tier: string | null = parsed.serviceTier ?? null): AnswerContext {
    const reply = directives.reply ?? (directives.words ? numberedWords(directives.words, directives.wordBytes) : undefined);
    const turn = planTurn({ ...parsed, reply, parallelTools: directives.parallelTools === true && parsed.parallelToolCalls !== false, ...(directives.tool && { toolChoice: directives.tool }) });
    const ctx = { id: randomBytes(12).toString('hex'), created: Math.floor(Date.now() / 1000), directives, turn, model: parsed.model, includeUsage: parsed.includeUsage, choices: parsed.choices ?? 1, logprobs: parsed.logprobs, thinking: parsed.thinking, extra: parsed.extra };
    bill.add({
      credential, headers, provider: endpoint.flavor,
      endpoint: billedPath, model: parsed.model, tier, units: endpoint.wire.billed(ctx), receivedAt,
      ...(directives.tag !== undefined && { tag: directives.tag }),
    });
    return ctx;
  }

  async function answer(receivedAt: Date, req: http.IncomingMessage, url: URL, res: http.ServerResponse, endpoint: Endpoint, parsed: ParsedChat, directives: Directives) {
    const ctx = accepted(endpoint.wire.credential(req, url), req.headers, url.pathname.replace(/^\/x\/[^/]*/, ''), endpoint, parsed, directives, receivedAt);
    if (!parsed.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify(endpoint.wire.answer(ctx)));
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    let contentSent = 0;
    let gone = false;
    res.once('close', () => {
      if (!res.writableFinished) {
        gone = true;
        abandoned += 1;
      }
    });
    for (const frame of endpoint.wire.stream(ctx)) {
      if (gone) return;
      if (frame.content && directives.cutAfter !== undefined && contentSent >= directives.cutAfter) {
        // A stream cut mid-way: what was sent arrives, then the connection drops with no
        // terminating event.
        await new Promise((r) => setTimeout(r, 20));
        res.socket?.destroy();
        return;
      }
      const more = res.write(`${frame.event ? `event: ${frame.event}\n` : ''}${sseData(frame.data, directives.multilineData === true)}\n`);
      frames += 1;
      if (frame.content) contentSent += 1;
      // A slow reader holds the stream back, as a provider's server does.
      if (!more) {
        await new Promise<void>((resolve) => {
          const wake = () => {
            res.off('drain', wake);
            res.off('close', wake);
            resolve();
          };
          res.on('drain', wake);
          res.on('close', wake);
        });
      }
      // Tokens arrive over time, as from a real model; it also lets each frame flush.
      await new Promise((r) => setTimeout(r, 1));
    }
    res.end();
  }

  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${bound}`,
    received,
    abandonedStreams: () => abandoned,
    abandonedWaits: () => abandonedWaits,
    framesSent: () => frames,
    videoSubmits: () => video.submits,
    abandonedVideoSubmits: () => video.abandonedSubmits,
    videoRenderedSeconds: () => video.renderedSeconds,
    bill,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
