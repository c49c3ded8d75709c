import { chatRequestSchema, EXTENSION_FIELDS, parseAttribution, parseCacheControl } from './chat-request';
import type { ChatBody } from '../../core/providers/types';
import type { GatewayContext } from '../context';
import { parseInput } from '../validation';
import { serveChat, type ChatCall } from './chat-call';
import { openAIChatWire } from './protocols/openai-chat';
import type { GatewayServices } from './services';

const EXTENSIONS: ReadonlySet<string> = new Set(EXTENSION_FIELDS);

/** The request without the fields only the gateway reads: what goes to the provider. */
function providerBody(request: Record<string, unknown>): ChatBody {
  const body: Record<string, unknown> = {};
  for (const k in request) if (!EXTENSIONS.has(k)) body[k] = request[k];
  return body as ChatBody;
}

/** `POST /v1/chat/completions` (spec 4.1). */
export function chatCompletions(services: GatewayServices) {
  return async (ctx: GatewayContext): Promise<void> => {
    const started = performance.now();
    const key = ctx.state.key!;
    const request = parseInput(chatRequestSchema, ctx.state.body);
    const attribution = parseAttribution(request.metadata);
    const cacheControl = parseCacheControl(request.cache, (name) => ctx.get(name));

    const body = providerBody(request);
    const config = await services.orgConfig.get(key.orgId);
    const call: ChatCall = { ctx, services, key, config, endpoint: openAIChatWire.endpoint, plan: null, body, attribution, logging: request.logging !== false, started, createdAt: new Date(), hold: null, cache: null };
    await serveChat(call, {
      model: request.model,
      fallbacks: request.fallbacks ?? [],
      allow: request.routing?.providers?.allow,
      deny: request.routing?.providers?.deny,
      cacheControl,
      stream: request.stream === true,
      includeUsage: request.stream_options?.include_usage === true,
    }, openAIChatWire);
  };
}
