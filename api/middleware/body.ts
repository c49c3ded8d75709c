import type { IncomingMessage } from 'node:http';
import type { Middleware } from 'koa';
import getRawBody from 'raw-body';
import { GatewayError } from '../../core/errors';
import type { GatewayContext, GatewayState } from '../context';

const MB = 1_000_000;
/** Spec section 8: per-endpoint request body limits; every other endpoint takes 1 MB. */
const BODY_LIMITS: ReadonlyArray<[path: string, bytes: number]> = [
  ['/v1/chat/completions', 28 * MB],
  // Anthropic Messages and OpenAI Responses carry the same prompts (images inline), so the chat limit.
  ['/v1/messages', 28 * MB],
  ['/v1/messages/count_tokens', 28 * MB],
  ['/v1/responses', 28 * MB],
  // Up to 2,048 inputs of up to 8,191 tokens each (OpenAI's bounds; its 300,000-token request cap is the provider's to enforce).
  ['/v1/embeddings', 8 * MB],
  ['/v1/images/edits', 51 * MB],
  ['/v1/audio/transcriptions', 26 * MB],
  ['/v1/videos', 11 * MB],
  // A batch's JSONL input (issue 56): OpenAI's 200 MB a file, and the multipart framing around it.
  ['/v1/files', 201 * MB],
  // Anthropic's bound on a message batch's body; its route streams it (api/gateway/message-batches.ts).
  ['/v1/messages/batches', 256 * MB],
];
export const DEFAULT_BODY_LIMIT = 1 * MB;

export function bodyLimitFor(path: string): number {
  const normalized = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  return BODY_LIMITS.find(([p]) => p === normalized)?.[1] ?? DEFAULT_BODY_LIMIT;
}

function tooLarge(limit: number): GatewayError {
  return new GatewayError('request_too_large', `Request body is larger than this endpoint accepts (${limit} bytes).`);
}

// The lingering close after a refused body (nginx's lingering_time and lingering_timeout):
// it lasts at most LINGER_MAX_MS in all, LINGER_IDLE_MS without a byte from the client, and
// LINGER_MAX_BYTES more read and discarded.
export const LINGER_MAX_MS = 30_000;
export const LINGER_IDLE_MS = 5_000;
export const LINGER_MAX_BYTES = 64 * MB;

/**
 * A refused body is not read, yet closing the socket while the client is still sending it
 * resets the connection under the client (EPIPE, ECONNRESET) before it reads the answer. So
 * the rest of the body is read and thrown away, never buffered; the socket closes once the body
 * has ended, or after LINGER_MAX_MS, LINGER_IDLE_MS of silence or LINGER_MAX_BYTES, whichever
 * comes first. Node closes a `Connection: close` socket through `destroySoon` once the answer
 * is written: until the lingering ends, that only half-closes it (the answer, then FIN).
 *
 * The promise settles when the lingering ends (`true` when the whole body was read). The error
 * handler waits for it before answering: a client that gets its answer while it is still
 * uploading may stop writing and wait forever for a body it believes unfinished (Node's fetch,
 * and so the `openai` SDK, does, once the answer overtakes a large upload under load). So the
 * answer comes after the body, up to these bounds, except to a client that waits for
 * `100 Continue` before sending any (it is answered at once and sends nothing).
 */
export function lingerAfterRefusal(req: IncomingMessage): Promise<boolean> {
  if (req.complete || req.readableEnded || req.destroyed) return Promise.resolve(true);
  const socket = req.socket;
  let answered = false;
  let over = false;
  let discarded = 0;
  let ended!: (whole: boolean) => void;
  const done = new Promise<boolean>((resolve) => (ended = resolve));
  const stop = () => {
    if (over) return;
    over = true;
    clearTimeout(whole);
    clearTimeout(idle);
    req.off('data', onData);
    req.off('end', stop);
    socket.off('close', stop);
    // Past the bounds nothing more is read; a body that ended leaves nothing unread. A client
    // still sending past them gets the answer, then the socket is closed outright once it is
    // written (nginx's lingering_time), rather than half-closed under a writer that would wait
    // on it forever.
    if (!req.readableEnded) {
      req.pause();
      socket.once('finish', () => socket.destroy());
    }
    delete (socket as Partial<typeof socket>).destroySoon;
    if (answered && !socket.destroyed) socket.destroySoon();
    ended(req.readableEnded);
  };
  const whole = setTimeout(stop, LINGER_MAX_MS).unref();
  let idle = setTimeout(stop, LINGER_IDLE_MS).unref();
  const onData = (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > LINGER_MAX_BYTES) return stop();
    clearTimeout(idle);
    idle = setTimeout(stop, LINGER_IDLE_MS).unref();
  };
  socket.destroySoon = () => {
    answered = true;
    socket.end();
  };
  req.on('data', onData);
  req.once('end', stop);
  socket.once('close', stop);
  req.resume();
  return done;
}

/** Whether the client sent `Expect: 100-continue` and was not told to go on: its body is not coming. */
export function awaitingContinue(req: IncomingMessage, res: { _sent100?: boolean }): boolean {
  return (req.headers.expect ?? '').toLowerCase() === '100-continue' && res._sent100 !== true;
}

/**
 * Refuses an oversized declared body from its Content-Length alone, before auth and before
 * reading. `beforeRefusal` runs first (it sets the rate headers of a key it can identify from
 * the Authorization header alone); it must not throw.
 */
export function bodyLimit(options: { beforeRefusal?: (ctx: GatewayContext) => Promise<void> } = {}): Middleware<GatewayState> {
  return async (ctx, next) => {
    const limit = bodyLimitFor(ctx.path);
    ctx.state.bodyLimit = limit;
    const declared = ctx.get('content-length');
    if (declared && Number(declared) > limit) {
      await options.beforeRefusal?.(ctx);
      // The error middleware answers it, lingering over the unread body.
      throw tooLarge(limit);
    }
    await next();
  };
}

/**
 * Reads and parses a JSON body for methods that carry one, stopping at the endpoint's limit
 * while streaming (a chunked body has no Content-Length to check up front).
 */
export function jsonBody(): Middleware<GatewayState> {
  return async (ctx, next) => {
    if (ctx.method === 'GET' || ctx.method === 'HEAD' || (ctx.method === 'DELETE' && !ctx.get('content-length'))) {
      return next();
    }
    // A client that sent `Expect: 100-continue` waits for this before sending the body.
    if (ctx.get('expect').toLowerCase() === '100-continue') ctx.res.writeContinue();
    let raw: string;
    try {
      raw = await getRawBody(ctx.req, {
        limit: ctx.state.bodyLimit,
        length: ctx.get('content-length') || undefined,
        encoding: 'utf8',
      });
    } catch (err) {
      if ((err as { type?: string }).type === 'entity.too.large') {
        throw tooLarge(ctx.state.bodyLimit);
      }
      throw new GatewayError('invalid_request', 'Could not read the request body.', { cause: err });
    }
    if (raw.trim() === '') {
      ctx.state.body = undefined;
    } else {
      try {
        ctx.state.body = JSON.parse(raw);
      } catch {
        throw new GatewayError('invalid_json', 'The request body is not valid JSON.');
      }
    }
    await next();
  };
}
