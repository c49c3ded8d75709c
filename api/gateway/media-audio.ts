import { z } from 'zod';
import { GatewayError } from '../../core/errors';
import { multipartForward, type SpooledMultipart } from '../../core/http/multipart';
import { speechCost, speechWorstCase, transcriptionCost, transcriptionWorstCase } from '../../core/pricing/media-cost';
import { transcriptAs } from '../../core/providers/media/transcript-formats';
import { TRANSCRIPTION_FORMATS, type TranscriptionFormat, type TranscriptionResult } from '../../core/providers/media/types';
import type { UpstreamSuccess } from '../../core/providers/upstream';
import type { GatewayContext } from '../context';
import { parseInput, modelName } from '../validation';
import { MEDIA_EXTENSIONS, multipartRouting, promptField } from './media-images';
import { serveMedia, servedFields } from './media-call';
import type { GatewayServices } from './services';

/**
 * `POST /v1/audio/transcriptions` (multipart) and `POST /v1/audio/speech` (JSON), as the OpenAI
 * API answers them (issue 14), so the official SDK works unmodified.
 */

/** The transcription form's parts the gateway reads or forwards; others are dropped (spec 7 rule 6). */
export const TRANSCRIPTION_FILES = ['file'] as const;
export const TRANSCRIPTION_FIELDS = [
  'model', 'language', 'prompt', 'response_format', 'temperature', 'timestamp_granularities[]', 'include[]', 'chunking_strategy',
  'known_speaker_names[]', 'known_speaker_references[]', 'stream', 'fallbacks[]', 'metadata', 'logging', 'routing',
] as const;
const TRANSCRIPTION_EXTENSION_FIELDS = ['fallbacks[]', 'metadata', 'logging', 'routing'];

const transcriptionSchema = z.object({
  model: modelName,
  response_format: z.enum(TRANSCRIPTION_FORMATS).optional(),
  // Streamed transcripts (server-sent events) are not relayed: refused rather than half-served.
  stream: z.enum(['false']).optional(),
  'fallbacks[]': z.array(z.string().min(1)).max(5).optional(),
  metadata: z.string().max(8192).optional(),
  routing: z.string().max(8192).optional(),
  logging: z.enum(['true', 'false']).optional(),
});

/**
 * The audio-header reader (`music-metadata` and its parsers, about 1 MB of heap), loaded by the
 * first transcription rather than at start: most API processes never serve one. A `require`, as
 * core/mcp/sdk.ts explains, so tsx, Jest and the esbuild build resolve it alike.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, see above
const audioDuration = () => require('../../core/pricing/audio-duration') as typeof import('../../core/pricing/audio-duration');

/** What OpenAI answers text formats with. */
const TEXT_TYPES: Record<string, string> = { text: 'text/plain; charset=utf-8', srt: 'text/plain; charset=utf-8', vtt: 'text/plain; charset=utf-8' };

/**
 * `POST /v1/audio/transcriptions` (issue 20): held at the larger of the file header's duration
 * and the most its size can hold (core/pricing/audio-duration.ts); settled at the duration the
 * provider reports, asked for in a format that states it whatever the client asked (the
 * client's format is rendered from that answer), else at what was held.
 */
export function audioTranscriptions(services: GatewayServices) {
  return async (ctx: GatewayContext): Promise<void> => {
    const form = ctx.state.multipart as SpooledMultipart;
    const request = parseInput(transcriptionSchema, form.fields);
    const file = form.files.find((f) => f.field === 'file');
    if (!file) throw new GatewayError('invalid_request', '`file` is required: the audio to transcribe.', { details: { param: 'file' } });
    const format: TranscriptionFormat = request.response_format ?? 'json';
    const measured = await audioDuration().reservationSeconds(file.path);
    const fields = Object.fromEntries(Object.entries(form.fields).filter(([k]) => !TRANSCRIPTION_EXTENSION_FIELDS.includes(k)));
    const forwarded = { fields, files: [file] };
    const routing = multipartRouting(request);
    const loggedRequest = { ...fields, file: { filename: file.filename, bytes: file.size, header_seconds: measured.header, held_seconds: measured.seconds } };
    /** The provider's length of the audio (its `duration` or duration usage), else what was held. */
    const settledSeconds = (usage: TranscriptionResult['usage']) => (usage && 'type' in usage && usage.type === 'duration' ? usage.seconds : measured.seconds);

    await serveMedia<TranscriptionResult>(ctx, services, 'audio.transcriptions', routing, {
      loggedRequest,
      guardedText: promptField(fields, loggedRequest, 'prompt'),
      worstCase: (c, config) => transcriptionWorstCase({ kind: c.connection.kind, model: c.upstreamModel, modelId: c.modelId, prices: config.prices, seconds: measured.seconds }),
      async attempt(candidate, adapter, send) {
        const { overrides, ...call } = adapter.transcriptionRequest(fields, { model: candidate.upstreamModel, config: candidate.connection.config, modelId: candidate.modelId });
        // The format the answer comes in: the one asked upstream, which states the audio's length.
        const upstream = (overrides.response_format as TranscriptionFormat | undefined) ?? format;
        const sent = await send({ ...call, body: await multipartForward(forwarded, overrides) });
        if (!sent.ok) return sent;
        try {
          const parsed = adapter.parseTranscription(upstream, await sent.body.text());
          return { ok: true, value: { ...parsed, body: transcriptAs(format, upstream, parsed.body, settledSeconds(parsed.usage)) } };
        } catch (err) {
          return { ok: false, failure: { kind: 'server_error', message: `unreadable answer: ${(err as Error).message}` } };
        }
      },
      cost(served, config) {
        const c = served.candidate;
        const { usage } = served.value;
        const seconds = settledSeconds(usage);
        const estimate = transcriptionCost({ kind: c.connection.kind, model: c.upstreamModel, modelId: c.modelId, prices: config.prices, seconds, usage });
        return { estimate, usage: { ...usage, seconds } };
      },
      async answer(served, usage, call) {
        const { body } = served.value;
        if (typeof body === 'string') {
          ctx.type = TEXT_TYPES[format] ?? 'text/plain; charset=utf-8';
          ctx.body = body;
          return null;
        }
        // The provider's own usage (tokens or duration) with the cost beside it.
        const own = body.usage && typeof body.usage === 'object' ? body.usage as Record<string, unknown> : { type: 'duration', seconds: Math.ceil(settledSeconds(served.value.usage)) };
        ctx.body = { ...body, ...servedFields(call, served), usage: { ...own, cost: usage.cost, ...(usage.price_source !== undefined && { price_source: usage.price_source }) } };
        // A transcript is an audio answer's body: never logged (spec 4.1 logging).
        return null;
      },
    });
  };
}

const speechSchema = z.looseObject({
  model: modelName,
  input: z.string().min(1).max(4096),
  voice: z.union([z.string().min(1).max(64), z.looseObject({ id: z.string().min(1).max(256) })]),
  response_format: z.enum(['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm']).optional(),
  speed: z.number().min(0.25).max(4).optional(),
  // Server-sent speech events are not relayed; the audio stream is.
  stream_format: z.literal('audio').optional(),
  /** The gateway's extension: store the file and answer a link instead of the bytes. */
  delivery: z.enum(['stream', 'url']).optional(),
  ...MEDIA_EXTENSIONS,
});

const SPEECH_TYPES: Record<string, string> = { mp3: 'audio/mpeg', opus: 'audio/ogg', aac: 'audio/aac', flac: 'audio/flac', wav: 'audio/wav', pcm: 'audio/pcm' };
const SPEECH_FIELDS = ['delivery', ...Object.keys(MEDIA_EXTENSIONS)];

/**
 * `POST /v1/audio/speech`: the provider's audio bytes streamed on as they arrive (what the SDK's
 * `speech.create` reads), or, with `delivery: 'url'`, stored and answered as
 * `{id, audio: {url, expires_at, mime_type}, usage}` with the same link rules as images. Priced
 * by the input's characters, known before the call.
 */
export function audioSpeech(services: GatewayServices) {
  return async (ctx: GatewayContext): Promise<void> => {
    const request = parseInput(speechSchema, ctx.state.body);
    const body = Object.fromEntries(Object.entries(request).filter(([k]) => !SPEECH_FIELDS.includes(k)));
    const loggedRequest = { ...body };
    // What is spoken is what is priced: the input as sent, after any guardrail redaction.
    const characters = () => String(body.input).length;
    const format = request.response_format ?? 'mp3';

    await serveMedia<UpstreamSuccess>(ctx, services, 'audio.speech', request, {
      loggedRequest,
      guardedText: promptField(body, loggedRequest, 'input'),
      worstCase: (c, config) => speechWorstCase({ kind: c.connection.kind, model: c.upstreamModel, modelId: c.modelId, prices: config.prices, characters: characters() }),
      // Served once the provider's answer has begun: nothing was sent to the client before that.
      async attempt(candidate, adapter, send) {
        const sent = await send(adapter.speechRequest({ ...body, model: candidate.upstreamModel }, { model: candidate.upstreamModel, config: candidate.connection.config, modelId: candidate.modelId }));
        return sent.ok ? { ok: true, value: sent } : sent;
      },
      discard: (served) => served.value.body.destroy(),
      cost(served, config) {
        const c = served.candidate;
        const estimate = speechCost({ kind: c.connection.kind, model: c.upstreamModel, modelId: c.modelId, prices: config.prices, characters: characters() });
        return { estimate, usage: { characters: characters() } };
      },
      async answer(served, usage, call) {
        const upstream = served.value;
        const given = upstream.headers['content-type'];
        const mimeType = (Array.isArray(given) ? given[0] : given)?.split(';')[0]?.trim() || SPEECH_TYPES[format]!;
        if (request.delivery !== 'url') {
          ctx.type = mimeType;
          ctx.body = upstream.body;
          return null;
        }
        const requestId = ctx.state.requestId;
        const kept = await services.mediaFiles.keep({
          orgId: call.key.orgId,
          requestId,
          filename: `${requestId}.${format}`,
          mimeType,
          body: upstream.body,
          baseUrl: services.jobs.links.baseUrl ?? `${ctx.protocol}://${ctx.host}`,
        });
        const audio = { url: kept.url, expires_at: Math.floor(kept.expiresAt.getTime() / 1000), mime_type: mimeType };
        ctx.body = { id: requestId, object: 'audio.speech', audio, ...servedFields(call, served), usage };
        return { audio: { url: kept.url } };
      },
    });
  };
}
