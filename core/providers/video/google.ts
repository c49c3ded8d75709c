import { classifyByStatus } from '../errors';
import { pickParameters, type VideoAdapter, type VideoStatus } from './types';

/**
 * The long-running operation as the Gemini API answers it (`models/<model>/operations/<id>`):
 * when done, `response.generateVideoResponse.generatedSamples[].video.uri`, or the safety
 * filter's count and reasons. It states no duration, resolution or aspect ratio.
 */
type Operation = {
  name: string;
  done?: boolean;
  metadata?: { progressPercent?: number };
  error?: { code?: number; message?: string };
  response?: { generateVideoResponse?: { generatedSamples?: Array<{ video?: { uri?: string } }>; raiMediaFilteredCount?: number; raiMediaFilteredReasons?: string[] } };
};

/** What Veo renders when the request does not say. */
const DEFAULT_RESOLUTION = '720p';
const DEFAULT_ASPECT_RATIO = '16:9';

/**
 * Gemini Veo: `predictLongRunning`, then the long-running operation, then the file's URI. The
 * length is `durationSeconds` (8 when unsaid), always sent; one sample is rendered (Veo's
 * `sampleCount` is never passed on). `resolution` picks the price; the aspect ratio, negative
 * prompt and person policy leave it alone.
 */
export const googleVideoAdapter: VideoAdapter = {
  deduplicatesSubmits: false,
  defaultSeconds: 8,
  parameters: ['aspectRatio', 'negativePrompt', 'personGeneration', 'resolution'],
  priceVariant: 'resolution',
  requestedLook: (extra) => ({
    resolution: typeof extra.resolution === 'string' ? extra.resolution : DEFAULT_RESOLUTION,
    aspectRatio: typeof extra.aspectRatio === 'string' ? extra.aspectRatio : DEFAULT_ASPECT_RATIO,
  }),
  submit: (r) => ({
    path: `/models/${encodeURIComponent(r.model)}:predictLongRunning`,
    body: {
      instances: [{ prompt: r.prompt }],
      parameters: { ...pickParameters(r.extra, googleVideoAdapter.parameters), durationSeconds: r.durationSeconds, ...(r.seed !== undefined && { seed: r.seed }) },
    },
  }),
  parseSubmit: (json) => ({ providerJobId: (json as Operation).name }),
  // The operation name is a path under the API root (`models/<model>/operations/<id>`).
  status: (name) => ({ method: 'GET', path: `/${name}` }),
  parseStatus(json): VideoStatus {
    const op = json as Operation;
    if (!op.done) return { state: 'running', progress: typeof op.metadata?.progressPercent === 'number' ? op.metadata.progressPercent / 100 : null };
    if (op.error) return { state: 'failed', message: op.error.message ?? 'The provider failed to render the video.', code: op.error.code !== undefined ? String(op.error.code) : null };
    const answer = op.response?.generateVideoResponse;
    const uri = answer?.generatedSamples?.[0]?.video?.uri;
    if (!uri) {
      const reasons = answer?.raiMediaFilteredReasons?.join(' ');
      return { state: 'failed', message: reasons ? `The provider filtered the video: ${reasons}` : 'The provider finished without a video.', code: null };
    }
    // The duration, resolution and aspect ratio are the ones asked (the activity fills them in).
    return { state: 'succeeded', durationSeconds: null, resolution: null, aspectRatio: null, mimeType: 'video/mp4', download: uri };
  },
  content: (_name, uri) => ({ method: 'GET', path: uri }),
  classifyError: (status, body, headers) => classifyByStatus(status, body, headers),
};
