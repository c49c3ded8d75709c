import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type http from 'node:http';
import busboy from 'busboy';
import { imageUsd, mediaTokenUsd, tokenUsd, unitUsd, type BillUnits } from './bill';
import { directivesInText, parseDirectives, type Directives } from './directives';
import { audioSeconds, colorFor, imageKind, png, pngInfo, speechFile, speechSamples, SPEECH_CONTENT_TYPES } from './files';
import { countWords } from './turn';
import { embeddingTexts, planGeminiEmbeddings, planOpenAiEmbeddings, type EmbeddingPlan } from './embeddings';
import { googleWire } from './wire/google';
import { openaiWire } from './wire/openai';
import type { Wire } from './wire/types';

/**
 * Images and audio as the providers serve them:
 *   OpenAI (and Azure deployments)  images/generations (JSON), images/edits (multipart),
 *                                   audio/transcriptions (multipart), audio/speech (JSON, streamed bytes)
 *   Gemini API                      models/{imagen-*}:predict
 *   Embeddings (embeddings.ts)      OpenAI/Azure .../embeddings, Gemini models/{m}:batchEmbedContents
 * Answers carry real small files (files.ts). DALL-E `url` answers point at `/blob/...` on the
 * sandbox itself, signed and valid for an hour like the real blob links.
 * Directives (directives.ts) come from the connection's `/x/...` prefix and from the prompt
 * text: `prompt` (images, edits, transcriptions, Imagen `instances[].prompt`) or `input` (speech).
 */
export type MediaKind = 'images' | 'edits' | 'transcriptions' | 'speech' | 'imagen' | 'embeddings' | 'gemini-embeddings';
type MediaEndpoint = { kind: MediaKind; wire: Wire; flavor: 'openai' | 'azure' | 'google'; model?: string };

const OPENAI_PATHS: Record<string, MediaKind> = {
  'images/generations': 'images', 'images/edits': 'edits', 'audio/transcriptions': 'transcriptions', 'audio/speech': 'speech',
};

export function mediaEndpointFor(method: string, path: string): MediaEndpoint | null {
  if (method !== 'POST') return null;
  let m: RegExpExecArray | null;
  if ((m = /^\/openai\/v1\/(images\/generations|images\/edits|audio\/transcriptions|audio\/speech)$/.exec(path))) return { kind: OPENAI_PATHS[m[1]!]!, wire: openaiWire, flavor: 'openai' };
  if ((m = /^\/azure\/openai\/deployments\/([^/]+)\/(images\/generations|images\/edits|audio\/transcriptions|audio\/speech)$/.exec(path))) {
    return { kind: OPENAI_PATHS[m[2]!]!, wire: openaiWire, flavor: 'azure', model: decodeURIComponent(m[1]!) };
  }
  if ((m = /^\/google\/v1beta\/models\/([^/:]+):predict$/.exec(path))) return { kind: 'imagen', wire: googleWire, flavor: 'google', model: decodeURIComponent(m[1]!) };
  if (path === '/openai/v1/embeddings') return { kind: 'embeddings', wire: openaiWire, flavor: 'openai' };
  if ((m = /^\/azure\/openai\/deployments\/([^/]+)\/embeddings$/.exec(path))) return { kind: 'embeddings', wire: openaiWire, flavor: 'azure', model: decodeURIComponent(m[1]!) };
  if ((m = /^\/google\/v1beta\/models\/([^/:]+):batchEmbedContents$/.exec(path))) return { kind: 'gemini-embeddings', wire: googleWire, flavor: 'google', model: decodeURIComponent(m[1]!) };
  return null;
}

export const isBlobPath = (method: string, path: string) => method === 'GET' && /^\/blob\/img-[0-9a-f]+\.png$/.test(path);

/** One uploaded file as recorded: never the bytes. */
export type ReceivedFile = { field: string; filename: string; contentType: string; size: number };
type Upload = ReceivedFile & { bytes: Buffer };
type Multipart = { fields: Record<string, string | string[]>; files: Upload[] };

export type MediaState = { blobs: Map<string, Buffer>; secret: Buffer };
export const createMediaState = (): MediaState => ({ blobs: new Map(), secret: randomBytes(32) });

/** How long a DALL-E image link stays valid, as the real blob links (one hour). */
const BLOB_TTL_MS = 60 * 60 * 1000;

export type MediaContext = {
  state: MediaState;
  req: http.IncomingMessage;
  res: http.ServerResponse;
  url: URL;
  /** The `/x/<directives>` prefix's directives, or ''. */
  pathDirectives: string;
  endpoint: MediaEndpoint;
  record(body: Record<string, unknown> | null, multipart?: { fields: string[]; files: ReceivedFile[] }): void;
  failing(d: Directives, key: string): boolean;
  send(status: number, payload: unknown, headers?: Record<string, string>): void;
  /** Bills the accepted call (sandbox/bill.ts): its model, units and price (null when unpriced). */
  charge(model: string, units: BillUnits, usd: number | null): void;
};

type Refusal = { status?: number; message: string; param?: string | null; code?: string | null };

async function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export function readMultipart(req: http.IncomingMessage): Promise<Multipart> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: req.headers });
    } catch (err) {
      reject(err);
      return;
    }
    const fields: Record<string, string | string[]> = {};
    const files: Upload[] = [];
    parser.on('field', (name, value) => {
      const known = fields[name];
      if (name.endsWith('[]')) fields[name] = [...((known as string[] | undefined) ?? []), value];
      else fields[name] = known === undefined ? value : [...(Array.isArray(known) ? known : [known]), value];
    });
    parser.on('file', (field, stream, info) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const bytes = Buffer.concat(chunks);
        files.push({ field, filename: info.filename ?? '', contentType: info.mimeType, size: bytes.length, bytes });
      });
    });
    parser.on('error', reject);
    parser.on('close', () => resolve({ fields, files }));
    req.pipe(parser);
  });
}

/** Serves a media request (the endpoint is known); records it, checks the credential, the body and the directives. */
export async function handleMedia(ctx: MediaContext): Promise<void> {
  const { endpoint, req, send } = ctx;
  const refuse = (r: Refusal) => {
    const status = r.status ?? 400;
    if (endpoint.flavor === 'google') return send(status, googleWire.error(status, r.message));
    return send(status, { error: { message: r.message, type: status === 429 ? 'rate_limit_error' : status >= 500 ? 'server_error' : 'invalid_request_error', param: r.param ?? null, code: r.code ?? null } });
  };

  const multipartKind = endpoint.kind === 'edits' || endpoint.kind === 'transcriptions';
  let body: Record<string, unknown> | null = null;
  let form: Multipart | null = null;
  if (multipartKind) {
    try {
      form = await readMultipart(req);
    } catch {
      // What the real API says to a body that is not multipart.
      await readBody(req).catch(() => undefined);
      ctx.record(null);
      return refuse({ message: `Invalid Content-Type header (${req.headers['content-type'] ?? 'none'}), expected multipart/form-data. (HINT: If you're using curl, you can pass -H 'Content-Type: multipart/form-data')` });
    }
    body = form.fields;
    ctx.record(form.fields, { fields: Object.keys(form.fields), files: form.files.map(({ bytes: _bytes, ...f }) => f) });
  } else {
    const raw = await readBody(req);
    try {
      body = raw.length ? (JSON.parse(raw.toString('utf8')) as Record<string, unknown>) : null;
    } catch {
      body = null;
    }
    ctx.record(body);
  }

  if (!endpoint.wire.credential(req, ctx.url)?.startsWith('sk-sandbox')) {
    const [status, payload] = endpoint.wire.unauthorized();
    return send(status, payload);
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) return refuse({ message: 'We could not parse the JSON body of your request. (HINT: This likely means you aren\'t using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)' });

  const promptText = endpoint.kind === 'speech' ? String(body.input ?? '')
    : endpoint.kind === 'imagen' ? ((body.instances as Array<{ prompt?: unknown }> | undefined) ?? []).map((i) => String(i?.prompt ?? '')).join(' ')
      : endpoint.kind === 'embeddings' || endpoint.kind === 'gemini-embeddings' ? embeddingTexts(body)
        : String(body.prompt ?? '');
  const directiveText = [ctx.pathDirectives, directivesInText(promptText)].join(',');
  const directives = parseDirectives(directiveText);

  const plan = endpoint.kind === 'images' ? planImages(body, endpoint)
    : endpoint.kind === 'edits' ? planEdits(form!, endpoint)
      : endpoint.kind === 'transcriptions' ? planTranscription(form!, endpoint)
        : endpoint.kind === 'speech' ? planSpeech(body, endpoint)
          : endpoint.kind === 'embeddings' ? answered(planOpenAiEmbeddings(body, endpoint.model))
            : endpoint.kind === 'gemini-embeddings' ? answered(planGeminiEmbeddings(body, endpoint.model!))
              : planImagen(body, endpoint);
  if ('refusal' in plan) return refuse(plan.refusal);

  if (directives.delayMs) await new Promise((r) => setTimeout(r, directives.delayMs));
  // The same failure rules as chat; `times` counts per connection prefix, directive text and endpoint kind.
  if (ctx.failing(directives, `${ctx.pathDirectives}|${directiveText}|${endpoint.kind}`)) {
    if (directives.reset) return void req.socket.destroy();
    if (directives.status) {
      return send(directives.status, endpoint.wire.error(directives.status, `sandbox: simulated ${directives.status}`), directives.retryAfter ? { 'retry-after': directives.retryAfter } : {});
    }
  }
  if (directives.moderation) {
    return refuse({ message: 'Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system.', code: endpoint.kind === 'images' || endpoint.kind === 'edits' ? 'content_policy_violation' : 'content_filter' });
  }
  if (directives.refuseParam && Object.keys(body).includes(directives.refuseParam)) {
    return refuse({ message: `Unsupported parameter: '${directives.refuseParam}' is not supported with this model.`, param: directives.refuseParam, code: 'unsupported_parameter' });
  }
  await plan.answer(ctx, directives);
}

/** `GET /blob/img-<id>.png?se=<expiry>&sig=<hmac>`: a DALL-E image link; 403 when tampered with or expired, like a blob SAS link. */
export function serveBlob(state: MediaState, path: string, url: URL, res: http.ServerResponse): void {
  const id = /^\/blob\/img-([0-9a-f]+)\.png$/.exec(path)![1]!;
  const se = url.searchParams.get('se') ?? '';
  const sig = Buffer.from(url.searchParams.get('sig') ?? '', 'hex');
  const want = blobSignature(state, id, se);
  const bytes = state.blobs.get(id);
  if (!bytes || sig.length !== want.length || !timingSafeEqual(sig, want) || !(Date.parse(se) > Date.now())) {
    res.writeHead(403, { 'content-type': 'application/xml' });
    return void res.end('<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed</Code><Message>Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.</Message></Error>');
  }
  res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(bytes.length) });
  res.end(bytes);
}

function blobSignature(state: MediaState, id: string, se: string): Buffer {
  return createHmac('sha256', state.secret).update(`${id}|${se}`).digest();
}

function blobUrl(ctx: MediaContext, bytes: Buffer): string {
  const id = randomBytes(12).toString('hex');
  ctx.state.blobs.set(id, bytes);
  const se = new Date(Date.now() + BLOB_TTL_MS).toISOString();
  return `http://${ctx.req.headers.host}/blob/img-${id}.png?se=${encodeURIComponent(se)}&sig=${blobSignature(ctx.state, id, se).toString('hex')}`;
}

type Plan = { refusal: Refusal } | { answer(ctx: MediaContext, d: Directives): Promise<void> | void };

/** A JSON answer decided whole (embeddings): sent as it is. */
function answered(plan: EmbeddingPlan): Plan {
  if ('refusal' in plan) return plan;
  return {
    answer(ctx) {
      const units = { input_tokens: plan.tokens };
      ctx.charge(plan.model, units, tokenUsd(ctx.endpoint.flavor, plan.model, units));
      ctx.send(200, plan.answer);
    },
  };
}
const refusal = (message: string, param: string | null = null, code: string | null = 'invalid_value', status = 400): Plan => ({ refusal: { message, param, code, status } });

// ---------------------------------------------------------------- images

type ImageFamily = 'dall-e-2' | 'dall-e-3' | 'gpt-image';

function imageFamily(model: string): ImageFamily | null {
  if (model.startsWith('gpt-image-1')) return 'gpt-image';
  if (model === 'dall-e-2' || model === 'dall-e-3') return model;
  return null;
}

const SIZES: Record<ImageFamily, string[]> = {
  'dall-e-2': ['256x256', '512x512', '1024x1024'],
  'dall-e-3': ['1024x1024', '1792x1024', '1024x1792'],
  'gpt-image': ['1024x1024', '1536x1024', '1024x1536', 'auto'],
};
const QUALITIES: Record<ImageFamily, string[]> = {
  'dall-e-2': ['standard', 'auto'],
  'dall-e-3': ['standard', 'hd', 'auto'],
  'gpt-image': ['low', 'medium', 'high', 'auto'],
};
const PROMPT_MAX: Record<ImageFamily, number> = { 'dall-e-2': 1000, 'dall-e-3': 4000, 'gpt-image': 32000 };
/** gpt-image-1 output tokens per image, by quality and shape (OpenAI's published table). */
const GPT_IMAGE_TOKENS: Record<string, [number, number]> = { low: [272, 408], medium: [1056, 1584], high: [4160, 6240] };
/** Input image tokens counted per image given to an edit (gpt-image-1). */
const GPT_IMAGE_INPUT_IMAGE_TOKENS = 65;

type ImageRequest = { family: ImageFamily; model: string; prompt: string; n: number; size: string; quality: string; responseFormat: string; style?: string; background?: string; outputFormat?: string };

/** What the images API refuses, shared by generations and edits; the normalised request otherwise. */
function imageRequest(raw: Record<string, unknown>, endpoint: MediaEndpoint, edit: boolean): ImageRequest | { refusal: Refusal } {
  const model = endpoint.model ?? String(raw.model ?? (edit ? 'dall-e-2' : 'dall-e-2'));
  const family = imageFamily(model);
  if (!family || (edit && family === 'dall-e-3')) {
    return { refusal: { message: `Invalid value: '${model}'. Supported values are: ${edit ? "'dall-e-2' and 'gpt-image-1'" : "'dall-e-2', 'dall-e-3' and 'gpt-image-1'"}.`, param: 'model', code: 'invalid_value' } };
  }
  if (typeof raw.prompt !== 'string' || raw.prompt === '') return { refusal: { message: "Missing required parameter: 'prompt'.", param: 'prompt', code: 'missing_required_parameter' } };
  if (raw.prompt.length > PROMPT_MAX[family]) return { refusal: { message: `Invalid 'prompt': string too long. Expected a string with maximum length ${PROMPT_MAX[family]}, but got a string with length ${raw.prompt.length} instead.`, param: 'prompt', code: 'string_above_max_length' } };
  const n = raw.n === undefined ? 1 : Number(raw.n);
  const maxN = family === 'dall-e-3' ? 1 : 10;
  if (!Number.isInteger(n) || n < 1 || n > maxN) {
    return { refusal: { message: family === 'dall-e-3' ? 'You must provide n=1 for this model.' : `Invalid 'n': integer out of range. Expected a value between 1 and 10, but got ${raw.n} instead.`, param: 'n', code: 'invalid_value' } };
  }
  const size = raw.size === undefined ? (family === 'gpt-image' ? 'auto' : '1024x1024') : String(raw.size);
  if (!SIZES[family].includes(size)) return { refusal: { message: `Invalid value: '${size}'. Supported values are: ${SIZES[family].map((s) => `'${s}'`).join(', ')}.`, param: 'size', code: 'invalid_value' } };
  const quality = raw.quality === undefined ? (family === 'dall-e-3' ? 'standard' : 'auto') : String(raw.quality);
  if (!QUALITIES[family].includes(quality)) return { refusal: { message: `Invalid value: '${quality}'. Supported values are: ${QUALITIES[family].map((s) => `'${s}'`).join(', ')}.`, param: 'quality', code: 'invalid_value' } };
  if (raw.response_format !== undefined) {
    // gpt-image models always answer base64 and refuse the parameter.
    if (family === 'gpt-image') return { refusal: { message: "Unknown parameter: 'response_format'.", param: 'response_format', code: 'unknown_parameter' } };
    if (!['url', 'b64_json'].includes(String(raw.response_format))) return { refusal: { message: `Invalid value: '${raw.response_format}'. Supported values are: 'url' and 'b64_json'.`, param: 'response_format', code: 'invalid_value' } };
  }
  if (raw.style !== undefined && (family !== 'dall-e-3' || !['vivid', 'natural'].includes(String(raw.style)))) {
    return { refusal: { message: family === 'dall-e-3' ? `Invalid value: '${raw.style}'. Supported values are: 'vivid' and 'natural'.` : "Unknown parameter: 'style'.", param: 'style', code: family === 'dall-e-3' ? 'invalid_value' : 'unknown_parameter' } };
  }
  for (const [param, allowed] of [['background', ['transparent', 'opaque', 'auto']], ['output_format', ['png', 'jpeg', 'webp']], ['moderation', ['low', 'auto']]] as const) {
    if (raw[param] === undefined) continue;
    if (family !== 'gpt-image') return { refusal: { message: `Unknown parameter: '${param}'.`, param, code: 'unknown_parameter' } };
    if (!(allowed as readonly string[]).includes(String(raw[param]))) return { refusal: { message: `Invalid value: '${raw[param]}'. Supported values are: ${allowed.map((s) => `'${s}'`).join(', ')}.`, param, code: 'invalid_value' } };
  }
  return {
    family, model, prompt: raw.prompt, n, size, quality,
    responseFormat: family === 'gpt-image' ? 'b64_json' : String(raw.response_format ?? 'url'),
    style: family === 'dall-e-3' ? String(raw.style ?? 'vivid') : undefined,
    background: raw.background as string | undefined,
    outputFormat: raw.output_format as string | undefined,
  };
}

function dimensions(size: string): [number, number] {
  const [w, h] = (size === 'auto' ? '1024x1024' : size).split('x').map(Number);
  return [w!, h!];
}

/** The images answer: `data` (url or b64_json), and for gpt-image models the settings used and token usage. */
function imagesAnswer(ctx: MediaContext, r: ImageRequest, inputImages: number) {
  const [w, h] = dimensions(r.size);
  const data = Array.from({ length: r.n }, (_, i) => {
    const bytes = png(w, h, colorFor(i));
    const image: Record<string, unknown> = r.responseFormat === 'b64_json' ? { b64_json: bytes.toString('base64') } : { url: blobUrl(ctx, bytes) };
    if (r.family === 'dall-e-3') image.revised_prompt = `A sandbox rendering of: ${r.prompt}`;
    return image;
  });
  const answer: Record<string, unknown> = { created: Math.floor(Date.now() / 1000), data };
  if (r.family !== 'gpt-image') ctx.charge(r.model, { images: r.n }, imageUsd(r.model, r.n, r.size, r.quality === 'auto' ? 'standard' : r.quality));
  if (r.family === 'gpt-image') {
    const quality = r.quality === 'auto' ? 'medium' : r.quality;
    const textTokens = countWords(r.prompt);
    const imageTokens = inputImages * GPT_IMAGE_INPUT_IMAGE_TOKENS;
    const output = GPT_IMAGE_TOKENS[quality]![w === h ? 0 : 1] * r.n;
    ctx.charge(r.model, { images: r.n, input_tokens: textTokens + imageTokens, output_tokens: output }, mediaTokenUsd(r.model, { text: textTokens, image: imageTokens, output }));
    Object.assign(answer, {
      background: r.background === 'transparent' ? 'transparent' : 'opaque',
      output_format: r.outputFormat ?? 'png',
      quality,
      size: `${w}x${h}`,
      usage: { input_tokens: textTokens + imageTokens, input_tokens_details: { text_tokens: textTokens, image_tokens: imageTokens }, output_tokens: output, total_tokens: textTokens + imageTokens + output },
    });
  }
  return answer;
}

function planImages(body: Record<string, unknown>, endpoint: MediaEndpoint): Plan {
  const r = imageRequest(body, endpoint, false);
  if ('refusal' in r) return r;
  return { answer: (ctx) => ctx.send(200, imagesAnswer(ctx, r, 0)) };
}

const MB = 1024 * 1024;

function planEdits(form: Multipart, endpoint: MediaEndpoint): Plan {
  const fields = Object.fromEntries(Object.entries(form.fields).map(([k, v]) => [k, Array.isArray(v) ? v[0] : v]));
  const r = imageRequest(fields, endpoint, true);
  if ('refusal' in r) return r;
  const images = form.files.filter((f) => f.field === 'image' || f.field === 'image[]');
  const mask = form.files.find((f) => f.field === 'mask');
  if (images.length === 0) return refusal("Missing required parameter: 'image'.", 'image', 'missing_required_parameter');
  if (r.family === 'dall-e-2') {
    if (images.length > 1) return refusal('dall-e-2 accepts a single image.', 'image');
    const info = pngInfo(images[0]!.bytes);
    if (!info || images[0]!.size >= 4 * MB) return refusal('Uploaded image must be a PNG and less than 4 MB.', 'image');
    if (info.width !== info.height) return refusal('Uploaded image must be square.', 'image');
    if (!mask && ![0, 4, 6].includes(info.colorType)) return refusal(`Invalid input image - format must be in ['RGBA', 'LA', 'L'], got ${info.colorType === 2 ? 'RGB' : 'P'}.`, 'image');
  } else {
    if (images.length > 16) return refusal('Too many images: at most 16 images can be given.', 'image');
    for (const image of images) {
      if (!['image/png', 'image/jpeg', 'image/webp'].includes(image.contentType)) {
        return refusal(`Invalid file '${image.field}': unsupported mimetype ('${image.contentType}'). Supported file formats are 'image/jpeg', 'image/png', and 'image/webp'.`, image.field, 'unsupported_file');
      }
      if (imageKind(image.bytes) !== image.contentType.slice('image/'.length)) return refusal(`Invalid image file or mode for image ${images.indexOf(image) + 1}, please check your image file.`, image.field, 'invalid_image_file');
      if (image.size >= 50 * MB) return refusal('Uploaded image must be less than 50 MB.', image.field, 'image_too_large');
    }
  }
  if (mask) {
    const info = pngInfo(mask.bytes);
    if (!info) return refusal('Uploaded mask must be a PNG and less than 4 MB.', 'mask');
    if (![4, 6].includes(info.colorType)) return refusal('Invalid mask image - the mask must have an alpha channel.', 'mask');
    const first = pngInfo(images[0]!.bytes);
    if (first && (first.width !== info.width || first.height !== info.height)) return refusal('Invalid mask image - mask and image must have the same dimensions.', 'mask');
  }
  return { answer: (ctx) => ctx.send(200, imagesAnswer(ctx, r, images.length)) };
}

// ---------------------------------------------------------------- Imagen

const IMAGEN_RATIOS: Record<string, [number, number]> = { '1:1': [1024, 1024], '3:4': [896, 1280], '4:3': [1280, 896], '9:16': [768, 1408], '16:9': [1408, 768] };

function planImagen(body: Record<string, unknown>, endpoint: MediaEndpoint): Plan {
  const model = endpoint.model ?? '';
  if (!model.startsWith('imagen-')) return refusal(`models/${model} is not found for API version v1beta, or is not supported for predict. Call ListModels to see the list of available models and their supported methods.`, null, null, 404);
  const instances = body.instances;
  if (!Array.isArray(instances) || instances.length === 0) return refusal('* PredictRequest.instances: instances is not specified');
  if (instances.some((i) => typeof (i as { prompt?: unknown })?.prompt !== 'string' || (i as { prompt: string }).prompt === '')) return refusal('Invalid value at \'instances[0]\': prompt is required.');
  const p = (body.parameters ?? {}) as Record<string, unknown>;
  const count = p.sampleCount === undefined ? 4 : Number(p.sampleCount);
  if (!Number.isInteger(count) || count < 1 || count > 4) return refusal('sampleCount must be between 1 and 4.');
  const ratio = String(p.aspectRatio ?? '1:1');
  if (!IMAGEN_RATIOS[ratio]) return refusal(`Unsupported aspect ratio: ${ratio}. Supported values are 1:1, 3:4, 4:3, 9:16 and 16:9.`);
  const imageSize = String(p.imageSize ?? '1K');
  if (!['1K', '2K'].includes(imageSize) || (imageSize === '2K' && !/^imagen-4\.0-(generate|ultra-generate)/.test(model))) return refusal(`Unsupported image size: ${imageSize} for model ${model}.`);
  if (p.personGeneration !== undefined && !['dont_allow', 'allow_adult', 'allow_all'].includes(String(p.personGeneration))) return refusal(`Invalid personGeneration: ${p.personGeneration}.`);
  const [w, h] = IMAGEN_RATIOS[ratio]!.map((x) => (imageSize === '2K' ? x * 2 : x)) as [number, number];
  return {
    answer(ctx) {
      ctx.charge(model, { images: count * instances.length }, imageUsd(model, count * instances.length));
      ctx.send(200, {
        predictions: Array.from({ length: count * instances.length }, (_, i) => ({ bytesBase64Encoded: png(w, h, colorFor(i)).toString('base64'), mimeType: 'image/png' })),
      });
    },
  };
}

// ---------------------------------------------------------------- transcriptions

const TRANSCRIBE_FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'];
const AUDIO_EXTENSIONS = ['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm'];
const LANGUAGES: Record<string, string> = { en: 'english', de: 'german', fr: 'french', es: 'spanish', it: 'italian', nl: 'dutch', pt: 'portuguese', ja: 'japanese', zh: 'chinese' };
/** The real limit on a transcription upload: 25 MB. */
export const TRANSCRIPTION_MAX_BYTES = 26214400;

const round2 = (x: number) => Math.round(x * 100) / 100;

function timestamp(seconds: number, sep: ',' | '.'): string {
  const ms = Math.round(seconds * 1000);
  const pad = (x: number, n = 2) => String(x).padStart(n, '0');
  return `${pad(Math.floor(ms / 3600000))}:${pad(Math.floor(ms / 60000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}${sep}${pad(ms % 1000, 3)}`;
}

/**
 * The transcript of any audio: two sentences naming its duration, timed over it word by word,
 * one segment a sentence. `seconds` is the duration read from the file (files.ts).
 */
export function transcript(seconds: number) {
  const duration = round2(seconds);
  const sentences = ['This is the sandbox transcript.', `The audio lasts ${duration} seconds.`];
  const allWords = sentences.flatMap((s) => s.split(' '));
  const per = seconds / allWords.length;
  const words = allWords.map((w, i) => ({ word: w.replace(/[.,]$/, ''), start: round2(i * per), end: round2((i + 1) * per) }));
  let at = 0;
  const segments = sentences.map((text, id) => {
    const count = text.split(' ').length;
    const segment = { id, seek: 0, start: round2(at * per), end: round2((at + count) * per), text: ` ${text}`, tokens: text.split(' ').map((_, k) => 1000 + id * 100 + k), temperature: 0, avg_logprob: -0.2, compression_ratio: 1.1, no_speech_prob: 0.01 };
    at += count;
    return segment;
  });
  return { text: sentences.join(' '), duration, words, segments };
}

function planTranscription(form: Multipart, endpoint: MediaEndpoint): Plan {
  const field = (name: string) => {
    const v = form.fields[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const model = endpoint.model ?? field('model');
  if (!model) return refusal('you must provide a model parameter', 'model', 'missing_required_parameter');
  const whisper = model.startsWith('whisper');
  if (!whisper && !/^gpt-4o(-mini)?-transcribe/.test(model)) return refusal(`Invalid value: '${model}'. Supported values are: 'whisper-1', 'gpt-4o-transcribe' and 'gpt-4o-mini-transcribe'.`, 'model');
  const file = form.files.find((f) => f.field === 'file');
  if (!file) return refusal("Missing required parameter: 'file'.", 'file', 'missing_required_parameter');
  if (file.size > TRANSCRIPTION_MAX_BYTES) return refusal(`Maximum content size limit (${TRANSCRIPTION_MAX_BYTES}) exceeded (${file.size} bytes read)`, 'file', null, 413);
  const ext = file.filename.split('.').pop()?.toLowerCase() ?? '';
  if (!AUDIO_EXTENSIONS.includes(ext)) return refusal(`Invalid file format. Supported formats: ${JSON.stringify(AUDIO_EXTENSIONS)}`, 'file', 'invalid_value');
  const format = field('response_format') ?? 'json';
  if (!TRANSCRIBE_FORMATS.includes(format)) return refusal(`Invalid value: '${format}'. Supported values are: ${TRANSCRIBE_FORMATS.map((f) => `'${f}'`).join(', ')}.`, 'response_format');
  if (!whisper && !['json', 'text'].includes(format)) return refusal(`response_format '${format}' is not compatible with model '${model}'. Use 'json' or 'text'.`, 'response_format', 'unsupported_value');
  const granularities = [...((form.fields['timestamp_granularities[]'] as string[] | undefined) ?? [])];
  if (granularities.some((g) => g !== 'word' && g !== 'segment')) return refusal(`Invalid value: '${granularities.find((g) => g !== 'word' && g !== 'segment')}'. Supported values are: 'word' and 'segment'.`, 'timestamp_granularities');
  if (granularities.length > 0 && format !== 'verbose_json') return refusal("timestamp_granularities[] is only supported with response_format 'verbose_json'.", 'timestamp_granularities', 'unsupported_value');
  const language = field('language');
  const prompt = field('prompt') ?? '';

  return {
    answer(ctx) {
      const seconds = audioSeconds(file.bytes);
      const t = transcript(seconds);
      // Billed whatever the format answered: whisper by the second (rounded up), the gpt-4o models by tokens.
      if (whisper) ctx.charge(model, { audio_seconds: Math.ceil(seconds) }, unitUsd('transcription', model, Math.ceil(seconds)));
      else {
        const tokens = { text: countWords(prompt), audio: Math.ceil(seconds * 10), output: countWords(t.text) };
        ctx.charge(model, { input_tokens: tokens.text + tokens.audio, input_audio_tokens: tokens.audio, output_tokens: tokens.output }, mediaTokenUsd(model, tokens));
      }
      const text = (body: string, type = 'text/plain; charset=utf-8') => {
        ctx.res.writeHead(200, { 'content-type': type });
        ctx.res.end(body);
      };
      if (format === 'text') return text(`${t.text}\n`);
      if (format === 'srt') return text(`${t.segments.map((s, i) => `${i + 1}\n${timestamp(s.start, ',')} --> ${timestamp(s.end, ',')}\n${s.text.trim()}\n`).join('\n')}\n`);
      if (format === 'vtt') return text(`WEBVTT\n\n${t.segments.map((s) => `${timestamp(s.start, '.')} --> ${timestamp(s.end, '.')}\n${s.text.trim()}\n`).join('\n')}\n`, 'text/vtt; charset=utf-8');
      const durationUsage = { type: 'duration', seconds: Math.ceil(seconds) };
      if (format === 'verbose_json') {
        const wantSegments = granularities.length === 0 || granularities.includes('segment');
        return ctx.send(200, {
          task: 'transcribe',
          language: language ? (LANGUAGES[language] ?? language) : 'english',
          duration: t.duration,
          text: t.text,
          ...(granularities.includes('word') && { words: t.words }),
          ...(wantSegments && { segments: t.segments }),
          usage: durationUsage,
        });
      }
      if (whisper) return ctx.send(200, { text: t.text, usage: durationUsage });
      // gpt-4o transcribe models bill tokens: 10 audio tokens a second (rounded up), the prompt's words, the transcript's words.
      const audioTokens = Math.ceil(seconds * 10);
      const textTokens = countWords(prompt);
      const output = countWords(t.text);
      return ctx.send(200, { text: t.text, usage: { type: 'tokens', input_tokens: audioTokens + textTokens, input_token_details: { text_tokens: textTokens, audio_tokens: audioTokens }, output_tokens: output, total_tokens: audioTokens + textTokens + output } });
    },
  };
}

// ---------------------------------------------------------------- speech

const VOICES = ['alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'onyx', 'nova', 'sage', 'shimmer', 'verse', 'marin', 'cedar'];
/** Bytes per chunk of a speech answer. */
const SPEECH_CHUNK = 4096;

function planSpeech(body: Record<string, unknown>, endpoint: MediaEndpoint): Plan {
  const model = endpoint.model ?? String(body.model ?? '');
  if (!model) return refusal("Missing required parameter: 'model'.", 'model', 'missing_required_parameter');
  if (!['tts-1', 'tts-1-hd'].includes(model) && !model.startsWith('gpt-4o-mini-tts')) return refusal(`Invalid value: '${model}'. Supported values are: 'tts-1', 'tts-1-hd' and 'gpt-4o-mini-tts'.`, 'model');
  if (typeof body.input !== 'string' || body.input === '') return refusal("Missing required parameter: 'input'.", 'input', 'missing_required_parameter');
  if (body.input.length > 4096) return refusal(`Invalid 'input': string too long. Expected a string with maximum length 4096, but got a string with length ${body.input.length} instead.`, 'input', 'string_above_max_length');
  if (typeof body.voice !== 'string') return refusal("Missing required parameter: 'voice'.", 'voice', 'missing_required_parameter');
  if (!VOICES.includes(body.voice)) return refusal(`Invalid value: '${body.voice}'. Supported values are: ${VOICES.map((v) => `'${v}'`).join(', ')}.`, 'voice');
  const format = String(body.response_format ?? 'mp3');
  if (!SPEECH_CONTENT_TYPES[format]) return refusal(`Invalid value: '${format}'. Supported values are: 'mp3', 'opus', 'aac', 'flac', 'wav', and 'pcm'.`, 'response_format');
  const speed = body.speed === undefined ? 1 : Number(body.speed);
  if (!(speed >= 0.25 && speed <= 4)) return refusal(`Invalid 'speed': decimal out of range. Expected a value between 0.25 and 4, but got ${body.speed} instead.`, 'speed', 'decimal_out_of_range');
  if (body.stream_format !== undefined && body.stream_format !== 'audio') return refusal("The sandbox streams speech as raw audio only ('stream_format': 'audio').", 'stream_format', 'unsupported_value');
  const input = body.input;

  return {
    async answer(ctx, d) {
      // Billed by the character (the table's estimate for the token-billed model), the whole input even when the answer is cut.
      ctx.charge(model, { characters: input.length }, unitUsd('speech', model, input.length));
      const bytes = speechFile(format, speechSamples(input, speed));
      const { res } = ctx;
      // No content-length: the bytes go out chunked, as the real API streams them.
      res.writeHead(200, { 'content-type': SPEECH_CONTENT_TYPES[format]! });
      let sent = 0;
      for (let at = 0; at < bytes.length; at += SPEECH_CHUNK) {
        if (d.cutAfter !== undefined && sent >= d.cutAfter) {
          await new Promise((r) => setTimeout(r, 20));
          res.socket?.destroy();
          return;
        }
        if (res.destroyed) return;
        const more = res.write(bytes.subarray(at, at + SPEECH_CHUNK));
        sent += 1;
        if (!more) await new Promise((r) => res.once('drain', r).once('close', r));
        await new Promise((r) => setImmediate(r));
      }
      res.end();
    },
  };
}
