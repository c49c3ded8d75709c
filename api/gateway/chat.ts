import { chatRequestSchema, EXTENSION_FIELDS, parseAttribution, withoutFields } from './chat-request';
import type { ChatBody } from '../../core/providers/types';
import type { GatewayContext } from '../context';
import { parseInput } from '../validation';
import { serveProtocol } from './chat-call';
import { openAIChatWire } from './protocols/openai-chat';
import type { GatewayServices } from './services';

const EXTENSIONS: ReadonlySet<string> = new Set(EXTENSION_FIELDS);


/** `POST /v1/chat/completions` (spec 4.1). */
export function chatCompletions(services: GatewayServices) {
  return async (ctx: GatewayContext): Promise<void> => {
    const started = performance.now();
    const request = parseInput(chatRequestSchema, ctx.state.body);
    const attribution = parseAttribution(request.metadata);
    await serveProtocol(ctx, services, request, {
      body: withoutFields(request, EXTENSIONS) as ChatBody, attribution, wire: openAIChatWire, started,
      answer: { includeUsage: request.stream_options?.include_usage === true },
    });
  };
}
