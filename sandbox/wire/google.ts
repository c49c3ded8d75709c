import { pieces } from '../turn';
import { completionBilled, completionTokens, isObject, textOf, type AnswerContext, type Frame, type ParsedChat, type Wire } from './types';

type Part = { text?: string; functionCall?: unknown; functionResponse?: { name: string; response: unknown } };
type Content = { role?: string; parts: Part[] };

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 503: 'UNAVAILABLE', 504: 'DEADLINE_EXCEEDED',
};

/** Fields of `GenerateContentRequest` and of its `generationConfig`; any other is refused as an unknown name. */
const FIELDS = new Set(['contents', 'systemInstruction', 'generationConfig', 'tools', 'toolConfig', 'safetySettings', 'cachedContent']);
const CONFIG_FIELDS = new Set(['temperature', 'topP', 'topK', 'candidateCount', 'maxOutputTokens', 'stopSequences', 'seed', 'presencePenalty', 'frequencyPenalty',
  'responseMimeType', 'responseSchema', 'responseJsonSchema', 'responseLogprobs', 'logprobs', 'thinkingConfig', 'responseModalities', 'speechConfig', 'mediaResolution']);

const unknownName = (name: string, at?: string) => `Invalid JSON payload received. Unknown name "${name}"${at ? ` at '${at}'` : ''}: Cannot find field.`;

/** What the real API refuses among the fields the gateway translates to. */
function invalidFields(body: Record<string, unknown>): string | null {
  const extra = Object.keys(body).find((k) => !FIELDS.has(k));
  if (extra) return unknownName(extra);
  if (body.generationConfig === undefined) return null;
  if (!isObject(body.generationConfig)) return unknownName('generationConfig');
  const config = body.generationConfig;
  const extraConfig = Object.keys(config).find((k) => !CONFIG_FIELDS.has(k));
  if (extraConfig) return unknownName(extraConfig, 'generation_config');
  const count = config.candidateCount;
  if (count !== undefined && (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > 8)) return 'candidateCount must be between 1 and 8.';
  if (Array.isArray(config.stopSequences) && config.stopSequences.length > 5) return 'stopSequences: at most 5 stop sequences are allowed.';
  if ((config.responseSchema !== undefined || config.responseJsonSchema !== undefined) && config.responseMimeType !== 'application/json') {
    return 'responseMimeType must be application/json when a response schema is set.';
  }
  if (config.responseSchema !== undefined && config.responseJsonSchema !== undefined) return 'responseSchema and responseJsonSchema cannot both be set.';
  return null;
}

function usageMetadata(ctx: AnswerContext) {
  return {
    promptTokenCount: ctx.turn.promptTokens,
    candidatesTokenCount: completionTokens(ctx) - (ctx.directives.reasoning ?? 0),
    totalTokenCount: ctx.turn.promptTokens + completionTokens(ctx),
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
    const invalid = invalidFields(body);
    if (invalid) return { invalid };
    const last = contents.at(-1)!;
    const response = last.parts.find((p) => p.functionResponse)?.functionResponse;
    const declarations = ((body.tools as Array<{ functionDeclarations?: Array<{ name: string; parameters?: object }> }> | undefined) ?? []).flatMap((t) => t.functionDeclarations ?? []);
    const config = (body.toolConfig as { functionCallingConfig?: { mode?: string; allowedFunctionNames?: string[] } } | undefined)?.functionCallingConfig;
    const generation = (body.generationConfig as { maxOutputTokens?: number; candidateCount?: number; responseMimeType?: string; responseJsonSchema?: Record<string, unknown>; responseSchema?: Record<string, unknown> } | undefined) ?? {};
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
      choices: generation.candidateCount ?? 1,
      ...(generation.responseMimeType === 'application/json' && { json: { schema: generation.responseJsonSchema ?? generation.responseSchema } }),
    };
  },

  answer(ctx) {
    const parts = ctx.turn.kind === 'tool' ? ctx.turn.calls.map((c) => ({ functionCall: { name: c.name, args: c.arguments } })) : [{ text: ctx.turn.text }];
    return {
      candidates: Array.from({ length: ctx.choices }, (_, index) => ({ content: { role: 'model', parts }, finishReason: finishReason(ctx), index })),
      usageMetadata: usageMetadata(ctx),
      modelVersion: ctx.model,
      responseId: ctx.id,
    };
  },

  stream(ctx): Frame[] {
    const frame = (index: number, parts: Part[], last: boolean, usage: boolean): Frame => ({
      content: true,
      data: JSON.stringify({
        candidates: [{ content: { role: 'model', parts }, index, ...(last && { finishReason: finishReason(ctx) }) }],
        ...(usage && { usageMetadata: usageMetadata(ctx) }),
        modelVersion: ctx.model,
        responseId: ctx.id,
      }),
    });
    const frames: Frame[] = [];
    for (let index = 0; index < ctx.choices; index += 1) {
      const lastChoice = index === ctx.choices - 1;
      if (ctx.turn.kind === 'tool') {
        frames.push(frame(index, ctx.turn.calls.map((c) => ({ functionCall: { name: c.name, args: c.arguments } })), true, lastChoice));
        continue;
      }
      const words = pieces(ctx.turn.text);
      words.forEach((w, i) => frames.push(frame(index, [{ text: w }], i === words.length - 1, lastChoice && i === words.length - 1)));
    }
    return frames;
  },

  // Gemini bills thoughts as output: candidates plus thoughts make the completion.
  billed: completionBilled,
};
