import type { Middleware } from 'koa';
import { GatewayError } from '../../core/errors';
import {
  isMultipartContentType,
  removeSpool,
  requestTooLarge,
  spoolDirFor,
  spoolMultipart,
  type MultipartLimits,
} from '../../core/http/multipart';
import { newId } from '../../core/ids';
import type { GatewayContext, GatewayState } from '../context';

export type MultipartBodyOptions = Omit<MultipartLimits, 'maxBodyBytes'> & {
  /** Root of the spool directories: `spoolRoot(config.dataDir)`, i.e. `<GW_DATA_DIR>/spool`. */
  spoolDir: string;
  /** The endpoint's whole-body limit; by default the one bodyLimit decided from the path (spec 8). */
  maxBodyBytes?: number;
};

/** Marks the middleware so the `/v1` JSON parser can tell, from the matched route, to leave the body alone. */
const TAKES_MULTIPART = Symbol('takesMultipart');

/**
 * A route's multipart/form-data intake. Refuses another content type (400), a declared
 * Content-Length over the limit (413, before reading; the error handler lingers over the body),
 * then streams the body through the counter and the parser into
 * `<spoolDir>/<request id>/` (see spoolMultipart for every refusal), and sets
 * `ctx.state.multipart`. The spool directory is removed on any error, and otherwise when the
 * response is done or the client goes away (the response's 'close').
 */
export function multipartBody(options: MultipartBodyOptions): Middleware<GatewayState> {
  const middleware: Middleware<GatewayState> = async (ctx, next) => {
    const limit = options.maxBodyBytes ?? ctx.state.bodyLimit;
    const declared = ctx.get('content-length');
    if (declared && Number(declared) > limit) throw requestTooLarge(limit);
    if (!isMultipartContentType(ctx.get('content-type'))) {
      throw new GatewayError('invalid_request', 'This endpoint takes a multipart/form-data body.');
    }
    // A client that sent `Expect: 100-continue` waits for this before sending the body.
    if (ctx.get('expect').toLowerCase() === '100-continue') ctx.res.writeContinue();

    const dir = spoolDirFor(options.spoolDir, ctx.state.requestId ?? newId('req'));
    let reading = true;
    let closed = false;
    ctx.res.once('close', () => {
      closed = true;
      // While reading, the reader's own failure path removes it once its writes have settled.
      if (!reading) void removeSpool(dir);
    });
    try {
      ctx.state.multipart = await spoolMultipart(ctx.req, dir, Object.assign({}, options, { maxBodyBytes: limit }));
    } catch (err) {
      await removeSpool(dir);
      throw err;
    } finally {
      reading = false;
    }
    if (closed) {
      await removeSpool(dir);
      throw new GatewayError('invalid_request', 'The client went away.');
    }
    await next();
  };
  Object.defineProperty(middleware, TAKES_MULTIPART, { value: true });
  return middleware;
}

/**
 * Marks a route's own body reader the way multipartBody is marked, so the router-wide JSON
 * parser leaves the body to it: a body too large to parse whole (an Anthropic message batch,
 * up to 256 MB) is streamed by its route.
 */
export function readsOwnBody(middleware: Middleware<GatewayState>): Middleware<GatewayState> {
  Object.defineProperty(middleware, TAKES_MULTIPART, { value: true });
  return middleware;
}

type MatchedLayer = { methods: readonly string[]; stack: ReadonlyArray<(...args: never[]) => unknown> };

/** Whether the route @koa/router matched for this request uses multipartBody. */
export function routeTakesMultipart(ctx: GatewayContext): boolean {
  const matched = (ctx as GatewayContext & { matched?: readonly MatchedLayer[] }).matched ?? [];
  return matched.some(
    (layer) => layer.methods.includes(ctx.method) && layer.stack.some((fn) => (fn as { [TAKES_MULTIPART]?: boolean })[TAKES_MULTIPART] === true),
  );
}

/**
 * Wraps a router-wide body parser (jsonBody) so it leaves the body of a route that takes
 * multipart unread: that route's multipartBody streams it itself.
 */
export function unlessMultipartRoute(parser: Middleware<GatewayState>): Middleware<GatewayState> {
  return (ctx, next) => (routeTakesMultipart(ctx) ? next() : parser(ctx, next));
}
