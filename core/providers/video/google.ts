import { classifyByStatus } from '../errors';
import type { VideoAdapter, VideoStatus } from './types';

type Operation = {
  name: string;
  done?: boolean;
  metadata?: { progressPercent?: number };
  error?: { code?: number; message?: string };
  response?: { generateVideoResponse?: { generatedSamples?: Array<{ video?: { uri?: string } }> }; durationSeconds?: number; resolution?: string; aspectRatio?: string };
};

/** Gemini Veo: `predictLongRunning`, then the long-running operation, then the file's URI. */
export const googleVideoAdapter: VideoAdapter = {
  submit: (r) => ({
    path: `/models/${encodeURIComponent(r.model)}:predictLongRunning`,
    body: {
      instances: [{ prompt: r.prompt }],
      parameters: { ...r.extra, ...(r.durationSeconds !== undefined && { durationSeconds: r.durationSeconds }), ...(r.seed !== undefined && { seed: r.seed }) },
    },
  }),
  parseSubmit: (json) => ({ providerJobId: (json as Operation).name }),
  // The operation name is a path under the API root (`models/<model>/operations/<id>`).
  status: (name) => ({ method: 'GET', path: `/${name}` }),
  parseStatus(json): VideoStatus {
    const op = json as Operation;
    if (!op.done) return { state: 'running', progress: typeof op.metadata?.progressPercent === 'number' ? op.metadata.progressPercent / 100 : null };
    if (op.error) return { state: 'failed', message: op.error.message ?? 'The provider failed to render the video.', code: op.error.code !== undefined ? String(op.error.code) : null };
    const uri = op.response?.generateVideoResponse?.generatedSamples?.[0]?.video?.uri;
    if (!uri) return { state: 'failed', message: 'The provider finished without a video.', code: null };
    return { state: 'succeeded', durationSeconds: op.response?.durationSeconds ?? null, resolution: op.response?.resolution ?? null, aspectRatio: op.response?.aspectRatio ?? null, mimeType: 'video/mp4', download: uri };
  },
  content: (_name, uri) => ({ method: 'GET', path: uri }),
  classifyError: (status, body, headers) => classifyByStatus(status, body, headers),
};
