import type Router from '@koa/router';
import { keyReach } from '../../core/auth/key-reach';
import type { Clock } from '../../core/clock';
import type { Database } from '../../core/db/client';
import { GatewayError } from '../../core/errors';
import { errorSummary } from '../../core/logger';
import { deleteStoredResponse, findStoredResponse, keepResponse } from '../../core/responses/stored-responses';
import type { GatewayContext, GatewayState } from '../context';
import { parseInput } from '../validation';
import { serveProtocol } from './chat-call';
import { parseAttribution } from './chat-request';
import { NATIVE_REQUEST } from '../../core/providers/types';
import { chatBodyOf, nativeBodyOf, nativeOnlyFields, openAIResponsesWire, responsesRequestSchema, type KeepResponse, type ResponsesRequest } from './protocols/openai-responses';
import type { GatewayServices } from './services';

/**
 * `POST /v1/responses` (OpenAI's Responses API, issue 35): the request translated into the chat
 * call's body and served by the one chat call (routes, failover, spend, cache, guardrails, the
 * request log), the answer as a response object or its semantic stream events. An OpenAI
 * connection is sent the request as it came, to its own `/responses`.
 *
 * `store` (true unless the request says false, as OpenAI's) keeps the finished response when the
 * organization keeps prompts (`prompt_logging_enabled`, and the request's `logging` is not false):
 * then `previous_response_id` continues it and `GET /v1/responses/{id}` reads it, within the
 * prompt retention and the key's reach (core/responses/stored-responses.ts). Otherwise nothing is
 * kept and the response says `store: false`.
 */

type Item = Record<string, unknown>;

/** The request's `input` as items: a string is one user message. */
function itemsOf(input: ResponsesRequest['input']): Item[] {
  return typeof input === 'string' ? [{ type: 'message', role: 'user', content: input }] : (input as Item[]);
}

export type ResponsesDeps = { db: Database; clock: Clock; gateway: GatewayServices };

export function responsesRoutes(router: Router<GatewayState>, deps: ResponsesDeps): void {
  const { db, clock, gateway: services } = deps;

  /** A kept response this key may read, or the OpenAI-shaped 404 naming where the id came from. */
  async function stored(ctx: GatewayContext, id: string, param?: string) {
    const found = await findStoredResponse(db, keyReach(ctx.state.key!), id, clock.now());
    if (!found) throw new GatewayError('not_found', `No response with id '${id}' was found (it may have expired, or was made by a key whose conversations this key cannot read).`, { details: param ? { param } : {} });
    return found;
  }

  router.post('/responses', async (ctx) => {
    const started = performance.now();
    const request = parseInput(responsesRequestSchema, ctx.state.body);
    const key = ctx.state.key!;
    // Earlier turns first: what the previous response was given, then what it answered.
    const earlier = request.previous_response_id ? await stored(ctx, request.previous_response_id, 'previous_response_id') : null;
    const input = [...(earlier ? [...earlier.input, ...((earlier.response.output as Item[] | undefined) ?? [])] : []), ...itemsOf(request.input)];
    const config = await services.orgConfig.get(key.orgId);
    const storing = request.store !== false && request.logging !== false && config.promptLoggingEnabled;

    const keep: KeepResponse | undefined = storing ? async (response) => {
      try {
        await keepResponse(db, { id: String(response.id), orgId: key.orgId, keyId: key.keyId, lineageId: key.lineageId, input, response });
        return true;
      } catch (err) {
        ctx.state.log?.warn({ err: errorSummary(err) }, 'response could not be kept for previous_response_id');
        return false;
      }
    } : undefined;
    const translated: ResponsesRequest = { ...request, input: input as ResponsesRequest['input'] };
    const body = chatBodyOf(translated);
    // An OpenAI connection takes the request as it came (reasoning items, `include`, and the
    // rest only its wire has); every other is sent the chat body's translation.
    body[NATIVE_REQUEST] = { wire: 'openai-responses', body: nativeBodyOf(request, input) };
    const nativeOnly = nativeOnlyFields(request);
    await serveProtocol(ctx, services, request, {
      body, wire: openAIResponsesWire({ ...request, store: storing }, keep), started,
      attribution: parseAttribution(request.user ? { user_id: request.user } : undefined),
      // A Responses stream always ends with the whole response, usage included.
      answer: { includeUsage: true, ...(nativeOnly.length > 0 && { nativeOnly }) },
    });
    // A whole answer is kept before the client reads it (a stream's is kept as it ends).
    const answer = ctx.body as Item | null;
    if (keep && !request.stream && ctx.status === 200 && answer?.object === 'response' && !(await keep(answer))) answer.store = false;
  });

  router.get('/responses/:id', async (ctx) => {
    ctx.body = (await stored(ctx, ctx.params.id!)).response;
  });

  router.delete('/responses/:id', async (ctx) => {
    const id = ctx.params.id!;
    if (!(await deleteStoredResponse(db, keyReach(ctx.state.key!), id))) throw new GatewayError('not_found', `No response with id '${id}' was found.`);
    ctx.body = { id, object: 'response', deleted: true };
  });
}
