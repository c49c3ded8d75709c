import { chatRequestSchema, EXTENSION_FIELDS, parseAttribution } from './chat-request';
import type { ChatBody } from '../../core/providers/types';
import type { GatewayContext } from '../context';
import { parseInput } from '../validation';
import { serveProtocol } from './chat-call';
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
    const request = parseInput(chatRequestSchema, ctx.state.body);
    const attribution = parseAttribution(request.metadata);
    await serveProtocol(ctx, services, request, {
      body: providerBody(request), attribution, wire: openAIChatWire, started,
      answer: { includeUsage: request.stream_options?.include_usage === true },
    });
  };
}
