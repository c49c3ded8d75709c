import type { EmbeddingsResult, ImageOut, ImagesResult, MediaAdapter } from './types';

/** The aspect ratios Imagen takes, with their width over height. */
export const IMAGEN_ASPECT_RATIOS = { '1:1': 1, '3:4': 3 / 4, '4:3': 4 / 3, '9:16': 9 / 16, '16:9': 16 / 9 } as const;
export type ImagenAspectRatio = keyof typeof IMAGEN_ASPECT_RATIOS;

/**
 * The Imagen aspect ratio closest to an OpenAI `size` (`1792x1024` is 16:9, `1536x1024` is 4:3).
 * Closeness is by the log of the ratio, so 2:1 and 1:2 are equally far from 1:1. `auto`, no size,
 * or one that is not `<width>x<height>` gives undefined: the parameter is left out and Imagen
 * uses its default (1:1). A size that already is one of the ratios is taken as it is.
 */
export function imagenAspectRatio(size: unknown): ImagenAspectRatio | undefined {
  if (typeof size !== 'string') return undefined;
  if (Object.hasOwn(IMAGEN_ASPECT_RATIOS, size)) return size as ImagenAspectRatio;
  const m = /^(\d+)x(\d+)$/.exec(size);
  if (!m) return undefined;
  const width = Number(m[1]);
  const height = Number(m[2]);
  if (width === 0 || height === 0) return undefined;
  const wanted = Math.log(width / height);
  let best: ImagenAspectRatio = '1:1';
  for (const [name, ratio] of Object.entries(IMAGEN_ASPECT_RATIOS) as [ImagenAspectRatio, number][]) {
    if (Math.abs(Math.log(ratio) - wanted) < Math.abs(Math.log(IMAGEN_ASPECT_RATIOS[best]) - wanted)) best = name;
  }
  return best;
}

/** Imagen's own parameters a client may set alongside the OpenAI ones; passed on as given. */
const IMAGEN_PARAMETERS = ['personGeneration', 'imageSize'] as const;

/** The most inputs one `batchEmbedContents` call takes (the Gemini API refuses more). */
export const GEMINI_EMBED_BATCH_MAX = 100;

/**
 * A vector scaled to length one. Gemini answers shortened vectors (`outputDimensionality`
 * under the model's own) without normalising them, where OpenAI's shortened ones are unit
 * length; the gateway makes them unit length, so cosine and dot product agree whoever served.
 */
export function normalised(vector: Float32Array): Float32Array {
  let sum = 0;
  for (const x of vector) sum += x * x;
  const norm = Math.sqrt(sum);
  if (norm === 0 || Math.abs(norm - 1) < 1e-6) return vector;
  return vector.map((x) => x / norm);
}

/** A Gemini `batchEmbedContents` answer: `embeddings[].values` in request order, no token count. */
export function parseGeminiEmbeddings(json: unknown, inputs: number, shortened: boolean): EmbeddingsResult {
  const list = (json as { embeddings?: unknown } | null)?.embeddings;
  if (!Array.isArray(list) || list.length !== inputs) throw new Error(`The embeddings answer holds ${Array.isArray(list) ? list.length : 'no'} vectors for ${inputs} inputs.`);
  const vectors = list.map((e: unknown, i) => {
    const values = (e as { values?: unknown } | null)?.values;
    if (!Array.isArray(values) || !values.every((x) => typeof x === 'number')) throw new Error(`Embedding ${i} of the answer holds no values.`);
    const vector = Float32Array.from(values as number[]);
    return shortened ? normalised(vector) : vector;
  });
  // The Gemini API states no token count for embeddings: the gateway estimates it.
  return { vectors, promptTokens: null };
}

const notOffered = (endpoint: string) => (): never => {
  throw new Error(`Google offers no ${endpoint} on this wire.`);
};

/**
 * Google Imagen through the Gemini API (`models/<model>:predict`): images.generations only.
 * The OpenAI request is translated: `prompt` to one instance, `n` to `sampleCount` (1 when
 * absent, as OpenAI's default, where Imagen's own default is 4), `size` to the closest aspect
 * ratio. Other OpenAI fields (quality, style, response_format) have no Imagen equivalent and
 * are not sent: Imagen always answers base64.
 */
export const googleMediaAdapter: MediaAdapter = {
  endpoints: ['images.generations', 'embeddings'],

  imagesRequest(body, { model }) {
    const aspectRatio = imagenAspectRatio(body.size);
    const parameters: Record<string, unknown> = { sampleCount: body.n ?? 1, ...(aspectRatio && { aspectRatio }) };
    for (const key of IMAGEN_PARAMETERS) if (body[key] !== undefined) parameters[key] = body[key];
    return {
      method: 'POST',
      path: `/models/${encodeURIComponent(model)}:predict`,
      body: { instances: [{ prompt: body.prompt }], parameters },
    };
  },

  parseImages(json): ImagesResult {
    const predictions = (json as { predictions?: unknown } | null)?.predictions;
    const list = Array.isArray(predictions) ? (predictions as Array<Record<string, unknown> | null>) : [];
    // A prediction the safety filter removed carries `raiFilteredReason` and no bytes: the others are served.
    const images: ImageOut[] = list
      .filter((p): p is Record<string, unknown> => typeof p?.bytesBase64Encoded === 'string' && p.bytesBase64Encoded !== '')
      .map((p) => ({ b64_json: p.bytesBase64Encoded as string, mime_type: typeof p.mimeType === 'string' && p.mimeType.startsWith('image/') ? p.mimeType : 'image/png' }));
    if (images.length === 0) {
      const reason = list.map((p) => p?.raiFilteredReason).find((r) => typeof r === 'string');
      throw new Error(reason ? `Imagen answered no image: ${String(reason)}` : 'The Imagen answer holds no base64 image.');
    }
    // Imagen states no creation time nor token usage (it is priced per image).
    return { created: Math.floor(Date.now() / 1000), images, usage: null, settings: {} };
  },

  editRequest: notOffered('images.edits'),
  transcriptionRequest: notOffered('audio.transcriptions'),
  parseTranscription: notOffered('audio.transcriptions'),
  speechRequest: notOffered('audio.speech'),

  /**
   * Embeddings by `models/<model>:batchEmbedContents`, one request per input text (with
   * `outputDimensionality` for `dimensions`). Token ids cannot cross to this wire, nor more
   * inputs than one batch takes: such a request is refused for this candidate.
   */
  embeddingsRequest({ input, dimensions }, { model }) {
    if (input.some((i) => typeof i !== 'string')) return { refusal: 'Gemini embeds text only, not token ids.' };
    if (input.length > GEMINI_EMBED_BATCH_MAX) return { refusal: `Gemini embeds at most ${GEMINI_EMBED_BATCH_MAX} inputs in one request.` };
    const name = `models/${model}`;
    return {
      method: 'POST',
      path: `/models/${encodeURIComponent(model)}:batchEmbedContents`,
      body: { requests: (input as string[]).map((text) => ({ model: name, content: { parts: [{ text }] }, ...(dimensions !== undefined && { outputDimensionality: dimensions }) })) },
    };
  },

  parseEmbeddings: (json, body) => parseGeminiEmbeddings(json, body.input.length, body.dimensions !== undefined),
};
