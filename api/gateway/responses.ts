import type Router from '@koa/router';
import type { Clock } from '../../core/clock';
import type { Database } from '../../core/db/client';
import { GatewayError } from '../../core/errors';
import { errorSummary } from '../../core/logger';
import {
  checkConversationBounds, deleteStoredResponse, findConversationHead, findStoredResponse, keepResponse, loadConversation, storedResponseReader,
  type ConversationHead,
} from '../../core/responses/stored-responses';
import type { GatewayContext, GatewayState } from '../context';
import { parseInput } from '../validation';
import { serveProtocol } from './chat-call';
import { parseAttribution } from './chat-request';
import { NATIVE_REQUEST } from '../../core/providers/types';
import {
  asLogged, chatBodyOf, nativeBodyOf, nativeOnlyFields, openAIResponsesWire, responsesRequestSchema, type KeepResponse, type ResponsesRequest, type Translation, type Untranslated,
} from './protocols/openai-responses';
import type { GatewayServices } from './services';

/**
 * `POST /v1/responses` (OpenAI's Responses API, issue 35): the request translated into the chat
 * call's body and served by the one chat call (routes, failover, spend, cache, guardrails, the
 * request log), the answer as a response object or its semantic stream events. An OpenAI
 * connection is sent the request as it came, to its own `/responses`.
 *
 * `store` (true unless the request says false, as OpenAI's) keeps the finished turn when the
 * organization keeps prompts (`prompt_logging_enabled`, and the request's `logging` is not false),
 * as the request log keeps it (guardrail matches redacted): then `previous_response_id` continues
 * it and `GET /v1/responses/{id}` reads it, within the prompt retention and the request log's body
 * rule (core/responses/stored-responses.ts). A continuation that would keep a conversation past
 * its bounds is refused before anything is sent. Otherwise nothing is kept and the response says
 * `store: false`.
 */

type Item = Record<string, unknown>;

/** The request's `input` as items: a string is one user message. */
function itemsOf(input: ResponsesRequest['input']): Item[] {
  return typeof input === 'string' ? [{ type: 'message', role: 'user', content: input }] : (input as Item[]);
}

export type ResponsesDeps = { db: Database; clock: Clock; gateway: GatewayServices };

/** OpenAI's 404 for an id this key cannot read, naming where the id came from. */
function notFound(id: string, param?: string, why = 'it may have expired, or was made by a key whose conversations this key cannot read'): GatewayError {
  return new GatewayError('not_found', `No response with id '${id}' was found (${why}).`, { details: param ? { param } : {} });
}

export function responsesRoutes(router: Router<GatewayState>, deps: ResponsesDeps): void {
  const { db, clock, gateway: services } = deps;

  /** Who is reading, by the request log's body rule (the plan's history window from the cached organization config). */
  async function readerOf(ctx: GatewayContext) {
    const key = ctx.state.key!;
    const config = await services.orgConfig.get(key.orgId);
    return storedResponseReader(key, config.plan, clock.now());
  }

  router.post('/responses', async (ctx) => {
    const started = performance.now();
    const request = parseInput(responsesRequestSchema, ctx.state.body);
    const key = ctx.state.key!;
    const config = await services.orgConfig.get(key.orgId);
    const storing = request.store !== false && request.logging !== false && config.promptLoggingEnabled;
    const own = itemsOf(request.input);

    // Earlier turns first: each one's input, then what it answered. The turn named is read (and
    // the bounds checked) before the conversation is loaded.
    let previous: ConversationHead | null = null;
    let earlier: Item[] = [];
    if (request.previous_response_id) {
      const reader = storedResponseReader(key, config.plan, clock.now());
      previous = await findConversationHead(db, reader, request.previous_response_id);
      if (!previous) throw notFound(request.previous_response_id, 'previous_response_id');
      if (storing) checkConversationBounds(previous, Buffer.byteLength(JSON.stringify(own)));
      const loaded = await loadConversation(db, reader, previous);
      if (!loaded) throw notFound(request.previous_response_id, 'previous_response_id', 'an earlier response of its conversation has expired or was deleted, or is not this key\'s to read');
      earlier = loaded;
    }
    const input = [...earlier, ...own];
    const translated: ResponsesRequest = { ...request, input: input as ResponsesRequest['input'] };
    const origins: number[] = [];
    const untranslated: Untranslated = new Set();
    const body = chatBodyOf(translated, origins, untranslated);
    const translation: Translation = { messages: body.messages, origins, from: earlier.length };

    const keep: KeepResponse | undefined = storing ? async (response, guard) => {
      try {
        const turn = guard ? asLogged(own, response, translation, guard) : { input: own, response };
        await keepResponse(db, { id: String(response.id), orgId: key.orgId, keyId: key.keyId, lineageId: key.lineageId, previous, ...turn });
        return true;
      } catch (err) {
        ctx.state.log?.warn({ err: errorSummary(err) }, 'response could not be kept for previous_response_id');
        return false;
      }
    } : undefined;
    // An OpenAI connection takes the request as it came (reasoning items, `include`, and the
    // rest only its wire has); every other is sent the chat body's translation.
    // Named when another wire serves: the fields only OpenAI's reads, then the tools and items the translation left out.
    const nativeOnly = [...nativeOnlyFields(request), ...untranslated];
    body[NATIVE_REQUEST] = { wire: 'openai-responses', body: nativeBodyOf(request, input), ...(nativeOnly.length > 0 && { leftOut: nativeOnly }) };
    const call = await serveProtocol(ctx, services, request, {
      body, wire: openAIResponsesWire({ ...request, store: storing }, keep), started,
      attribution: parseAttribution(request.user ? { user_id: request.user } : undefined),
      // A Responses stream always ends with the whole response, usage included.
      answer: { includeUsage: true, ...(nativeOnly.length > 0 && { nativeOnly }) },
    });
    // A whole answer is kept before the client reads it (a stream's is kept as it ends).
    const answer = ctx.body as Item | null;
    if (keep && !request.stream && ctx.status === 200 && answer?.object === 'response' && !(await keep(answer, call.guard))) answer.store = false;
  });

  router.get('/responses/:id', async (ctx) => {
    const id = ctx.params.id!;
    const found = await findStoredResponse(db, await readerOf(ctx), id);
    if (!found) throw notFound(id);
    ctx.body = found;
  });

  router.delete('/responses/:id', async (ctx) => {
    const id = ctx.params.id!;
    if (!(await deleteStoredResponse(db, await readerOf(ctx), id))) throw notFound(id);
    ctx.body = { id, object: 'response', deleted: true };
  });
}
