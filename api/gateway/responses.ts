import type Router from '@koa/router';
import { GatewayError } from '../../core/errors';
import type { GatewayState } from '../context';
import { parseInput } from '../validation';
import { serveChat, type ChatCall } from './chat-call';
import { parseAttribution, parseCacheControl } from './chat-request';
import { chatBodyOf, openAIResponsesWire, responsesRequestSchema } from './protocols/openai-responses';
import type { GatewayServices } from './services';

/**
 * `POST /v1/responses` (OpenAI's Responses API, issue 35): the request translated into the chat
 * call's body and served by the one chat call (routes, failover, spend, cache, guardrails, the
 * request log), the answer as a response object or its semantic stream events. Responses are
 * not kept yet: `store` answers false and `previous_response_id` is refused (docs/decisions.md).
 */
export function responsesRoutes(router: Router<GatewayState>, services: GatewayServices): void {
  router.post('/responses', async (ctx) => {
    const started = performance.now();
    const key = ctx.state.key!;
    const request = parseInput(responsesRequestSchema, ctx.state.body);
    if (request.previous_response_id) {
      throw new GatewayError('invalid_request', '`previous_response_id` is not supported yet: the gateway does not keep responses. Send the earlier turns in `input`.');
    }
    const attribution = parseAttribution(request.user ? { user_id: request.user } : undefined);
    const cacheControl = parseCacheControl(request.cache, (name) => ctx.get(name));
    const body = chatBodyOf(request);
    const config = await services.orgConfig.get(key.orgId);
    const wire = openAIResponsesWire({ ...request, store: false });
    const call: ChatCall = { ctx, services, key, config, endpoint: wire.endpoint, plan: null, body, attribution, logging: request.logging !== false, started, createdAt: new Date(), hold: null, cache: null };
    await serveChat(call, {
      model: request.model,
      fallbacks: request.fallbacks ?? [],
      allow: request.routing?.providers?.allow,
      deny: request.routing?.providers?.deny,
      cacheControl,
      stream: request.stream === true,
      // A Responses stream always ends with the whole response, usage included.
      includeUsage: true,
    }, wire);
  });
}
