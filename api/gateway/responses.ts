import type Router from '@koa/router';
import { GatewayError } from '../../core/errors';
import type { GatewayState } from '../context';
import { parseInput } from '../validation';
import { serveProtocol } from './chat-call';
import { parseAttribution } from './chat-request';
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
    const request = parseInput(responsesRequestSchema, ctx.state.body);
    if (request.previous_response_id) {
      throw new GatewayError('invalid_request', '`previous_response_id` is not supported yet: the gateway does not keep responses. Send the earlier turns in `input`.');
    }
    const wire = openAIResponsesWire({ ...request, store: false });
    await serveProtocol(ctx, services, request, {
      body: chatBodyOf(request), wire, started,
      attribution: parseAttribution(request.user ? { user_id: request.user } : undefined),
      // A Responses stream always ends with the whole response, usage included.
      answer: { includeUsage: true },
    });
  });
}
