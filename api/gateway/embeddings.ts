import { z } from 'zod';
import type Router from '@koa/router';
import { embeddingModel } from '../../core/catalog/embedding-models';
import { GatewayError } from '../../core/errors';
import { decodeTokenInputs, encodeTokenInput, type TokenEncodingName } from '../../core/guardrails/token-ids';
import { estimateCost } from '../../core/pricing/cost';
import type { ProviderKind } from '../../core/providers/kinds';
import type { EmbeddingsBody, EmbeddingsResult } from '../../core/providers/media/types';
import { float32FromBase64, float32ToBase64 } from '../../core/providers/media/vectors';
import type { CachedServing } from '../../core/response-cache/answer';
import type { Candidate } from '../../core/routing/candidates';
import type { OrgConfig } from '../../core/routing/org-config';
import { estimateTextTokens } from '../../core/spend/worst-case';
import type { GatewayContext, GatewayState } from '../context';
import { modelName, parseInput } from '../validation';
import { cacheField } from './cache-step';
import { parseCacheControl } from './chat-request';
import { MEDIA_EXTENSIONS } from './media-images';
import { serveMedia, servedFields, type MediaEndpointHandler, type MediaServed } from './media-call';
import type { GatewayServices } from './services';

/**
 * `POST /v1/embeddings` (issue 35), the OpenAI embeddings shape, through the media call
 * (api/gateway/media-call.ts): planned, guarded, held, failed over, settled and logged as every
 * non-chat endpoint; kept in the response cache as chat answers are. Vectors are held as float32
 * (what every provider computes) and written in the client's `encoding_format`; the request log
 * keeps each vector's length, never the vector.
 */

/** OpenAI's own bounds: at most 2,048 inputs, none empty. */
export const EMBEDDING_INPUTS_MAX = 2048;

const tokenIds = z.array(z.number().int().min(0)).min(1);
export const embeddingsRequestSchema = z.looseObject({
  ...MEDIA_EXTENSIONS,
  cache: z.unknown().optional(),
  model: modelName,
  input: z.union([
    z.string().min(1),
    z.array(z.string().min(1)).min(1).max(EMBEDDING_INPUTS_MAX),
    tokenIds,
    z.array(tokenIds).min(1).max(EMBEDDING_INPUTS_MAX),
  ], { error: 'expected a non-empty string, an array of up to 2048 non-empty strings, an array of token ids, or an array of up to 2048 arrays of token ids' }),
  dimensions: z.number().int().min(1).max(65_536).optional(),
  encoding_format: z.enum(['float', 'base64']).optional(),
});

/** The gateway's own fields and those it answers itself: never sent on. */
const NOT_FORWARDED: ReadonlySet<string> = new Set([...Object.keys(MEDIA_EXTENSIONS), 'cache', 'model', 'input', 'dimensions', 'encoding_format']);

/** What the cache keeps of an embeddings answer: the vectors as base64 float32, a quarter of decimal text's size. */
type CachedEmbeddings = CachedServing & { vectors: string[]; promptTokens: number; estimated: boolean };

/** The inputs always as a list: one string or one token-id array is one input. */
export function inputList(input: z.infer<typeof embeddingsRequestSchema>['input']): string[] | number[][] {
  if (typeof input === 'string') return [input];
  if (input.every((i) => typeof i === 'number')) return [input as number[]];
  return input as string[] | number[][];
}

const isTextInput = (input: EmbeddingsBody['input']): input is string[] => typeof input[0] === 'string';

/**
 * The encoding that reads token-id input as text for guardrails: every candidate's model must
 * have the same known one (the embedding table's `tokenizer`), else the ids cannot be checked
 * and the request is refused, saying so, rather than sent unchecked.
 */
function tokenEncodingOf(candidates: readonly Candidate[], model: string): TokenEncodingName {
  const encodings = new Set(candidates.map((c) => tableRow(c)?.tokenizer ?? null));
  const [only] = encodings;
  if (encodings.size === 1 && only) return only;
  throw new GatewayError('invalid_request', `\`input\` is token ids, which a guardrail policy over this key must check as text, and the gateway does not know the tokenizer of \`${model}\`${encodings.size > 1 ? ' on every connection that may serve it' : ''}: send the input as text.`);
}

/** Input tokens, estimated as chat's prompts are (leaning high); token ids count one each. */
export function estimatedTokens(inputs: EmbeddingsBody['input']): number {
  let tokens = 0;
  for (const i of inputs) tokens += typeof i === 'string' ? estimateTextTokens(i) : i.length;
  return tokens;
}

/** The table's row for a candidate: by the name it is sent, or the name the client used (an Azure deployment). */
function tableRow(candidate: Candidate) {
  const vendor = candidate.modelId.slice(0, candidate.modelId.indexOf('/')) as ProviderKind;
  const name = candidate.modelId.slice(candidate.modelId.indexOf('/') + 1);
  return embeddingModel(candidate.connection.kind, candidate.upstreamModel) ?? embeddingModel(candidate.connection.kind, name) ?? embeddingModel(vendor, name);
}

/** Embeddings are priced per input token, from the same sources as chat's prompt tokens. */
export function priced(candidate: Candidate, config: OrgConfig, services: Pick<GatewayServices, 'catalog'>, tokens: number) {
  return estimateCost({
    usage: { prompt_tokens: tokens, completion_tokens: 0, total_tokens: tokens },
    kind: candidate.connection.kind,
    upstreamModel: candidate.upstreamModel,
    modelId: candidate.modelId,
    prices: config.prices,
    catalog: services.catalog,
  });
}

/** `POST /v1/embeddings`. */
export function createEmbeddings(services: GatewayServices) {
  return async (ctx: GatewayContext): Promise<void> => {
    const request = parseInput(embeddingsRequestSchema, ctx.state.body);
    const extra: Record<string, unknown> = {};
    for (const k in request) if (!NOT_FORWARDED.has(k)) extra[k] = request[k];
    const body: EmbeddingsBody = { input: inputList(request.input), ...(request.dimensions !== undefined && { dimensions: request.dimensions }), extra };
    const { user: _user, ...answerShaping } = extra;
    const loggedRequest: Record<string, unknown> = { model: request.model, input: body.input, ...(request.dimensions !== undefined && { dimensions: request.dimensions }), ...(request.encoding_format && { encoding_format: request.encoding_format }) };
    const encoding = request.encoding_format ?? 'float';
    const write = (vectors: readonly (Float32Array | string)[]) => vectors.map((v, index) => ({
      object: 'embedding',
      index,
      embedding: encoding === 'base64' ? (typeof v === 'string' ? v : float32ToBase64(v)) : Array.from(typeof v === 'string' ? float32FromBase64(v) : v),
    }));
    // The log keeps how long each vector is, never the vector.
    const logged = (vectors: readonly (Float32Array | string)[]) => ({ data: vectors.map((v, index) => ({ index, dimensions: typeof v === 'string' ? Buffer.byteLength(v, 'base64') / 4 : v.length })) });
    const tokensOf = (result: EmbeddingsResult) => result.promptTokens ?? estimatedTokens(body.input);
    const usageCounts = (tokens: number, estimated: boolean) => ({ prompt_tokens: tokens, total_tokens: tokens, ...(estimated && { estimated: true }) });

    // Token-id input under a guardrail policy: the encoding its text was read with, and that text.
    let decoded: { encoding: TokenEncodingName; texts: string[] } | null = null;

    const handler: MediaEndpointHandler<EmbeddingsResult, CachedEmbeddings> = {
      loggedRequest,
      guardedText: {
        read(candidates) {
          if (isTextInput(body.input)) return body.input;
          const encoding = tokenEncodingOf(candidates, request.model);
          decoded = { encoding, texts: decodeTokenInputs(encoding, body.input) };
          return decoded.texts;
        },
        write(sent, loggedTexts) {
          if (!decoded) {
            body.input = sent;
            loggedRequest.input = loggedTexts;
            return;
          }
          // Token ids stay the client's own unless a rule redacted their text: that input is sent
          // as the redacted text's ids, in the same encoding. The log never keeps ids whose text
          // a rule matched: with any finding it keeps the texts, every match redacted.
          const { encoding, texts } = decoded;
          const ids = body.input as number[][];
          body.input = sent.map((text, i) => (text === texts[i] ? ids[i]! : encodeTokenInput(encoding, text)));
          if (loggedTexts.some((text, i) => text !== texts[i])) loggedRequest.input = loggedTexts;
        },
      },
      refusal(candidate, adapter) {
        const row = tableRow(candidate);
        if (body.dimensions !== undefined && row && !row.shortenable) return `\`${candidate.modelId}\` does not take \`dimensions\`; its vectors have ${row.dimensions}.`;
        if (body.dimensions !== undefined && row && body.dimensions > row.dimensions) return `\`dimensions\` may be at most ${row.dimensions} for \`${candidate.modelId}\`.`;
        const call = adapter.embeddingsRequest(body, { model: candidate.upstreamModel, config: candidate.connection.config, modelId: candidate.modelId });
        return 'refusal' in call ? call.refusal : null;
      },
      worstCase: (candidate, config) => priced(candidate, config, services, estimatedTokens(body.input)),
      async attempt(candidate, adapter, send) {
        const call = adapter.embeddingsRequest(body, { model: candidate.upstreamModel, config: candidate.connection.config, modelId: candidate.modelId });
        // Planning left out candidates that refuse the input (`refusal` above).
        if ('refusal' in call) return { ok: false, failure: { kind: 'invalid_request', message: call.refusal, status: 400 } };
        const sent = await send(call);
        if (!sent.ok) return sent;
        try {
          return { ok: true, value: adapter.parseEmbeddings(await sent.body.json(), body) };
        } catch (err) {
          return { ok: false, failure: { kind: 'server_error', message: `unreadable answer: ${(err as Error).message}` } };
        }
      },
      cost(served, config) {
        const tokens = tokensOf(served.value);
        return { estimate: priced(served.candidate, config, services, tokens), usage: usageCounts(tokens, served.value.promptTokens === null) };
      },
      answer(served: MediaServed<EmbeddingsResult>, usage, call) {
        ctx.body = {
          object: 'list',
          data: write(served.value.vectors),
          model: served.candidate.upstreamModel,
          ...servedFields(call, served),
          usage,
          ...(call.cache && { cache: cacheField(call.cache, Date.now()) }),
        };
        return Promise.resolve(logged(served.value.vectors));
      },
      cache: {
        // Asked after guardrails: the inputs as sent (redacted where a rule redacts), as chat's key.
        key: () => ({ endpoint: 'embeddings', model: request.model, input: body.input, dimensions: body.dimensions, ...answerShaping }),
        control: parseCacheControl(request.cache, (name) => ctx.get(name)),
        entry: (served) => ({ vectors: served.value.vectors.map(float32ToBase64), promptTokens: tokensOf(served.value), estimated: served.value.promptTokens === null }),
        usageOf: (hit) => usageCounts(hit.promptTokens, hit.estimated),
        answerFromHit(hit, usage, call) {
          ctx.body = {
            object: 'list',
            data: write(hit.vectors),
            model: hit.model,
            provider: hit.provider,
            connection: hit.connection,
            route: hit.route,
            route_name: call.plan?.route?.slug ?? null,
            usage,
            cache: cacheField(call.cache!, Date.now()),
          };
          return logged(hit.vectors);
        },
      },
    };
    await serveMedia(ctx, services, 'embeddings', request, handler);
  };
}

export function embeddingsRoutes(router: Router<GatewayState>, services: GatewayServices): void {
  router.post('/embeddings', createEmbeddings(services));
}
