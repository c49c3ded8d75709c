import { z } from 'zod';
import { GatewayError } from '../../core/errors';
import type { TryResult } from '../../core/chat/execute';
import { multipartForward, type SpooledMultipart } from '../../core/http/multipart';
import { imageCost, imageWorstCase } from '../../core/pricing/media-cost';
import type { ImagesResult } from '../../core/providers/media/types';
import type { GatewayContext } from '../context';
import { parseInput, modelName } from '../validation';
import { chatRequestSchema } from './chat-request';
import { serveMedia, servedFields, type MediaEndpointHandler, type MediaRouting, type MediaServed, type SendUpstream } from './media-call';
import type { GatewayServices } from './services';
import type { Candidate } from '../../core/routing/candidates';
import type { OrgConfig } from '../../core/routing/org-config';

/**
 * `POST /v1/images/generations` (JSON) and `POST /v1/images/edits` (multipart), the OpenAI
 * images shape (issue 14). The provider is always asked for base64; unless the client asked
 * `response_format: 'b64_json'`, each image is stored and `data[].url` is a gateway-signed link
 * (`expires_at` beside it, unix seconds), for every model, gpt-image-1's too.
 */

/** The gateway's extension fields, as chat bounds them (spec 4.1). */
export const MEDIA_EXTENSIONS = {
  routing: chatRequestSchema.shape.routing,
  fallbacks: chatRequestSchema.shape.fallbacks,
  metadata: chatRequestSchema.shape.metadata,
  logging: chatRequestSchema.shape.logging,
};
const EXTENSION_NAMES = Object.keys(MEDIA_EXTENSIONS);

/** OpenAI's own bounds: a prompt of up to 32,000 characters (gpt-image-1), 1 to 10 images. */
const imageFields = {
  model: modelName,
  prompt: z.string().min(1).max(32_000),
  n: z.number().int().min(1).max(10).optional(),
  size: z.string().max(32).optional(),
  quality: z.string().max(32).optional(),
  response_format: z.enum(['url', 'b64_json']).optional(),
  // Streamed partial images are not relayed: a request asking for them is refused, not half-served.
  stream: z.literal(false).optional(),
  partial_images: z.literal(0).optional(),
};

const generationSchema = z.looseObject({ ...imageFields, ...MEDIA_EXTENSIONS });

type ImagesRequest = { model: string; prompt: string; n?: number; size?: string; quality?: string; response_format?: 'url' | 'b64_json' };

/** Multipart fields arrive as text: numbers and booleans are read from it before validation. */
const editSchema = z.object({
  ...imageFields,
  n: z.coerce.number().int().min(1).max(10).optional(),
  stream: z.enum(['false']).optional(),
  partial_images: z.enum(['0']).optional(),
  'fallbacks[]': z.array(z.string().min(1)).max(5).optional(),
  metadata: z.string().max(8192).optional(),
  routing: z.string().max(8192).optional(),
  logging: z.enum(['true', 'false']).optional(),
});

/** The edit form's parts the gateway reads or forwards; others are dropped (spec 7 rule 6). */
export const EDIT_FILES = ['image', 'image[]', 'mask'] as const;
export const EDIT_FIELDS = ['model', 'prompt', 'n', 'size', 'quality', 'response_format', 'user', 'background', 'output_format', 'output_compression', 'input_fidelity', 'moderation', 'stream', 'partial_images', 'fallbacks[]', 'metadata', 'logging', 'routing'] as const;

/** The gateway's own multipart fields: read here, never forwarded. */
const EDIT_EXTENSION_FIELDS = ['fallbacks[]', 'metadata', 'logging', 'routing'];

const EXTENSIONS: Record<string, string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp' };

/** Guardrails read the prompt where it is sent from, and put the redacted one back there and in the log. */
export function promptField(sent: Record<string, unknown>, logged: Record<string, unknown>, field: string): MediaEndpointHandler<unknown>['guardedText'] {
  return {
    read: () => (typeof sent[field] === 'string' ? [sent[field] as string] : []),
    write(texts, loggedTexts) {
      if (texts.length === 0) return;
      sent[field] = texts[0];
      logged[field] = loggedTexts[0];
    },
  };
}

function imagesHandler(ctx: GatewayContext, services: GatewayServices, request: ImagesRequest, sent: Record<string, unknown>, loggedRequest: Record<string, unknown>, inputImages: number,
  attempt: (candidate: Candidate, send: SendUpstream, adapter: MediaServed<ImagesResult>['adapter']) => Promise<TryResult<ImagesResult>>): MediaEndpointHandler<ImagesResult> {
  const prices = (config: OrgConfig) => config.prices;
  return {
    loggedRequest,
    guardedText: promptField(sent, loggedRequest, 'prompt'),
    worstCase: (c, config) => imageWorstCase({
      kind: c.connection.kind, model: c.upstreamModel, modelId: c.modelId, prices: prices(config),
      n: request.n ?? 1, size: request.size, quality: request.quality, promptCharacters: request.prompt.length, inputImages,
    }),
    attempt: (candidate, adapter, send) => attempt(candidate, send, adapter),
    cost(served, config) {
      const { images, usage, settings } = served.value;
      const c = served.candidate;
      const estimate = imageCost({
        kind: c.connection.kind, model: c.upstreamModel, modelId: c.modelId, prices: prices(config), n: images.length,
        size: typeof settings.size === 'string' ? settings.size : request.size,
        quality: typeof settings.quality === 'string' ? settings.quality : request.quality,
        usage,
      });
      return { estimate, usage: { ...usage, images: images.length } };
    },
    async answer(served, usage, call) {
      const { images, created, settings } = served.value;
      const requestId = ctx.state.requestId;
      const baseUrl = services.jobs.links.baseUrl ?? `${ctx.protocol}://${ctx.host}`;
      const inline = request.response_format === 'b64_json';
      const data = await Promise.all(images.map(async (image, i) => {
        const revised = image.revised_prompt !== undefined ? { revised_prompt: image.revised_prompt } : {};
        if (inline) return { b64_json: image.b64_json, ...revised };
        const kept = await services.mediaFiles.keep({
          orgId: ctx.state.key!.orgId,
          requestId,
          filename: `${requestId}${images.length > 1 ? `-${i + 1}` : ''}.${EXTENSIONS[image.mime_type] ?? 'png'}`,
          mimeType: image.mime_type,
          body: Buffer.from(image.b64_json, 'base64'),
          baseUrl,
        });
        return { url: kept.url, expires_at: Math.floor(kept.expiresAt.getTime() / 1000), ...revised };
      }));
      ctx.body = { id: requestId, created, data, ...settings, ...servedFields(call, served), usage };
      // The log keeps links only, never image bytes (spec 4.1 logging).
      return { data: data.map((d) => ('url' in d ? { url: d.url } : { b64_json: '(omitted)' })) };
    },
  };
}

/** `POST /v1/images/generations`. */
export function imageGenerations(services: GatewayServices) {
  return async (ctx: GatewayContext): Promise<void> => {
    const request = parseInput(generationSchema, ctx.state.body);
    const body = Object.fromEntries(Object.entries(request).filter(([k]) => !EXTENSION_NAMES.includes(k) && k !== 'response_format'));
    const loggedRequest = { ...body };
    await serveMedia(ctx, services, 'images.generations', request, imagesHandler(ctx, services, request, body, loggedRequest, 0, async (candidate, send, adapter) => {
      const sent = await send(adapter.imagesRequest({ ...body, model: candidate.upstreamModel }, { model: candidate.upstreamModel, config: candidate.connection.config, modelId: candidate.modelId }));
      if (!sent.ok) return sent;
      return readImages(sent.body, adapter);
    }));
  };
}

/** `POST /v1/images/edits`: the spooled form is sent again, as a fresh body, to each candidate. */
export function imageEdits(services: GatewayServices) {
  return async (ctx: GatewayContext): Promise<void> => {
    const form = ctx.state.multipart as SpooledMultipart;
    const request = parseInput(editSchema, form.fields);
    const images = form.files.filter((f) => f.field === 'image' || f.field === 'image[]');
    if (images.length === 0) throw new GatewayError('invalid_request', '`image` is required: the image (or images) to edit.', { details: { param: 'image' } });
    const fields = Object.fromEntries(Object.entries(form.fields).filter(([k]) => !EDIT_EXTENSION_FIELDS.includes(k)));
    const forwarded = { fields, files: form.files };
    const routing = multipartRouting(request);
    const { response_format: _format, ...logged } = fields;
    const loggedRequest = { ...logged, files: form.files.map((f) => ({ field: f.field, filename: f.filename, bytes: f.size })) };
    await serveMedia(ctx, services, 'images.edits', routing, imagesHandler(ctx, services, request, fields, loggedRequest, images.length, async (candidate, send, adapter) => {
      const { overrides, ...call } = adapter.editRequest(fields, { model: candidate.upstreamModel, config: candidate.connection.config, modelId: candidate.modelId });
      const sent = await send({ ...call, body: await multipartForward(forwarded, overrides) });
      if (!sent.ok) return sent;
      return readImages(sent.body, adapter);
    }));
  };
}

async function readImages(body: { json(): Promise<unknown> }, adapter: MediaServed<ImagesResult>['adapter']): Promise<TryResult<ImagesResult>> {
  try {
    return { ok: true, value: adapter.parseImages(await body.json()) };
  } catch (err) {
    return { ok: false, failure: { kind: 'server_error', message: `unreadable answer: ${(err as Error).message}` } };
  }
}

/** A multipart field that carries JSON (`metadata`): unreadable JSON is a 400 naming it. */
export function parseJsonField(name: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new GatewayError('invalid_request', `Invalid \`${name}\`: it must be JSON text in a multipart request.`, { details: { param: name } });
  }
}

/** The gateway's own fields of a multipart request, read from their text form (see MEDIA_EXTENSIONS). */
export function multipartRouting(request: { model: string; 'fallbacks[]'?: string[]; metadata?: string; routing?: string; logging?: string }): MediaRouting {
  return {
    model: request.model,
    fallbacks: request['fallbacks[]'],
    metadata: request.metadata === undefined ? undefined : parseJsonField('metadata', request.metadata),
    routing: request.routing === undefined ? undefined : parseInput(MEDIA_EXTENSIONS.routing, parseJsonField('routing', request.routing)),
    logging: request.logging === undefined ? undefined : request.logging === 'true',
  };
}
