import { pieces } from '../turn';
import { textOf, type AnswerContext, type Frame, type ParsedChat, type Wire } from './types';

type Part = { text?: string; functionCall?: unknown; functionResponse?: { name: string; response: unknown } };
type Content = { role?: string; parts: Part[] };

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 503: 'UNAVAILABLE', 504: 'DEADLINE_EXCEEDED',
};

function usageMetadata(ctx: AnswerContext) {
  return {
    promptTokenCount: ctx.turn.promptTokens,
    candidatesTokenCount: ctx.turn.completionTokens - (ctx.directives.reasoning ?? 0),
    totalTokenCount: ctx.turn.promptTokens + ctx.turn.completionTokens,
    ...(ctx.directives.cached !== undefined && { cachedContentTokenCount: ctx.directives.cached }),
    ...(ctx.directives.reasoning !== undefined && { thoughtsTokenCount: ctx.directives.reasoning }),
  };
}

const finishReason = (ctx: AnswerContext) => (ctx.turn.truncated ? 'MAX_TOKENS' : 'STOP');

/** Gemini `generateContent` and `streamGenerateContent?alt=sse`. */
export const googleWire: Wire = {
  credential: (req, url) => (req.headers['x-goog-api-key'] as string | undefined) ?? url.searchParams.get('key') ?? undefined,
  unauthorized: () => [400, { error: { code: 400, message: 'API key not valid. Please pass a valid API key.', status: 'INVALID_ARGUMENT' } }],
  error: (status, message) => ({ error: { code: status, message, status: STATUS_NAMES[status] ?? 'UNKNOWN' } }),
  models: (ids) => ({ models: ids.map((id) => ({ name: `models/${id}`, displayName: id })) }),

  parseChat(body, route): ParsedChat | { invalid: string } {
    const contents = (body.contents as Content[] | undefined) ?? [];
    if (contents.length === 0) return { invalid: '* GenerateContentRequest.contents: contents is not specified' };
    const last = contents.at(-1)!;
    const response = last.parts.find((p) => p.functionResponse)?.functionResponse;
    const declarations = ((body.tools as Array<{ functionDeclarations?: Array<{ name: string; parameters?: object }> }> | undefined) ?? []).flatMap((t) => t.functionDeclarations ?? []);
    const config = (body.toolConfig as { functionCallingConfig?: { mode?: string; allowedFunctionNames?: string[] } } | undefined)?.functionCallingConfig;
    const generation = (body.generationConfig as { maxOutputTokens?: number } | undefined) ?? {};
    const system = (body.systemInstruction as Content | undefined)?.parts.map((p) => p.text ?? '').join(' ') ?? '';
    return {
      model: route.model ?? '',
      stream: route.stream === true,
      includeUsage: true,
      promptText: [system, ...contents.map((c) => c.parts.map((p) => p.text ?? '').join(' '))].join(' '),
      tools: declarations.map((d) => ({ name: d.name, parameters: d.parameters as never })),
      toolChoice: config?.mode === 'NONE' ? 'none' : config?.allowedFunctionNames?.[0],
      lastRole: response ? 'tool' : 'user',
      lastToolResult: response ? textOf(JSON.stringify(response.response)) : undefined,
      maxTokens: generation.maxOutputTokens,
      params: [...Object.keys(body), ...Object.keys(generation)],
    };
  },

  answer(ctx) {
    const parts = ctx.turn.kind === 'tool' ? [{ functionCall: { name: ctx.turn.name, args: ctx.turn.arguments } }] : [{ text: ctx.turn.text }];
    return {
      candidates: [{ content: { role: 'model', parts }, finishReason: finishReason(ctx), index: 0 }],
      usageMetadata: usageMetadata(ctx),
      modelVersion: ctx.model,
      responseId: ctx.id,
    };
  },

  stream(ctx): Frame[] {
    const frame = (parts: Part[], last: boolean): Frame => ({
      content: true,
      data: JSON.stringify({
        candidates: [{ content: { role: 'model', parts }, index: 0, ...(last && { finishReason: finishReason(ctx) }) }],
        ...(last && { usageMetadata: usageMetadata(ctx) }),
        modelVersion: ctx.model,
        responseId: ctx.id,
      }),
    });
    if (ctx.turn.kind === 'tool') return [frame([{ functionCall: { name: ctx.turn.name, args: ctx.turn.arguments } }], true)];
    const words = pieces(ctx.turn.text);
    return words.map((w, i) => frame([{ text: w }], i === words.length - 1));
  },
};
