import type Router from '@koa/router';
import { estimatePromptTokens } from '../../core/spend/worst-case';
import type { GatewayState } from '../context';
import { parseInput } from '../validation';
import { serveProtocol } from './chat-call';
import { parseAttribution } from './chat-request';
import { NATIVE_REQUEST } from '../../core/providers/types';
import { anthropicMessagesWire, chatBodyOf, chatMessagesOf, messagesRequestSchema, nativeBodyOf, nativeOnlyFields, refuseUntranslatable } from './protocols/anthropic-messages';
import type { GatewayServices } from './services';

/**
 * `POST /v1/messages` (Anthropic's Messages API, issue 35): the request translated into the chat
 * call's body and served by the one chat call (routes, failover, spend, cache, guardrails, the
 * request log), the answer in Messages' shapes. `metadata.user_id` is the request's user for
 * attribution as well as the provider's `user`.
 */
export function messagesRoutes(router: Router<GatewayState>, services: GatewayServices): void {
  router.post('/messages', async (ctx) => {
    const started = performance.now();
    const request = parseInput(messagesRequestSchema, ctx.state.body);
    refuseUntranslatable(request);
    const body = chatBodyOf(request);
    // An Anthropic connection takes the request as it came (cache_control, thinking blocks and
    // their signatures); every other is sent the chat body's translation.
    const betas = ctx.get('anthropic-beta').split(',').map((b) => b.trim()).filter(Boolean);
    const nativeOnly = nativeOnlyFields(request);
    body[NATIVE_REQUEST] = { wire: 'anthropic-messages', body: nativeBodyOf(request), ...(betas.length > 0 && { betas }), ...(nativeOnly.length > 0 && { leftOut: nativeOnly }) };
    await serveProtocol(ctx, services, request, {
      body, wire: anthropicMessagesWire, started,
      attribution: parseAttribution(request.metadata?.user_id ? { user_id: request.metadata.user_id } : undefined),
      answer: {
        // Messages streams always end with their usage (`message_delta`).
        includeUsage: true,
        // Only Anthropic's wire thinks in blocks and edits its context: named as dropped when another serves.
        ...(nativeOnly.length > 0 && { nativeOnly }),
      },
    });
  });

  /**
   * `POST /v1/messages/count_tokens`: the gateway's own estimate of the input (the one its spend
   * holds are made of: it leans high), with no provider called and nothing charged.
   */
  router.post('/messages/count_tokens', async (ctx) => {
    const request = parseInput(messagesRequestSchema.omit({ max_tokens: true }), ctx.state.body);
    const body = chatBodyOf({ ...request, max_tokens: 1 });
    ctx.body = { input_tokens: estimatePromptTokens({ messages: chatMessagesOf(request), tools: body.tools }) };
  });
}
