import { classifyByStatus } from '../errors';
import { pickParameters, type VideoAdapter, type VideoStatus } from './types';

type OpenAiVideo = { id: string; status?: string; progress?: number; seconds?: string | number; size?: string; error?: { code?: string; message?: string } | null };

/** What OpenAI renders when no `size` is asked. */
const DEFAULT_SIZE = '720x1280';

function aspect(size: string | undefined): string | null {
  const m = /^(\d+)x(\d+)$/.exec(size ?? '');
  if (!m) return null;
  const [w, h] = [Number(m[1]), Number(m[2])];
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  const g = gcd(w, h);
  return `${w / g}:${h / g}`;
}

/**
 * OpenAI videos API: `POST /videos`, `GET /videos/{id}`, `GET /videos/{id}/content`. The length
 * is `seconds` (a string; 4 when unsaid), always sent; `size` picks the price (sora-2-pro's
 * larger sizes cost more) and is the one client field passed on.
 */
export const openAiVideoAdapter: VideoAdapter = {
  // No evidence that OpenAI de-duplicates a create by its Idempotency-Key: its API reference
  // documents none, and its own SDK (openai 7.x) sets no idempotency header (issue 55). The key
  // is still sent; a submit whose outcome is unknown is not sent again.
  deduplicatesSubmits: false,
  defaultSeconds: 4,
  parameters: ['size'],
  priceVariant: 'size',
  requestedLook(extra) {
    const size = typeof extra.size === 'string' ? extra.size : DEFAULT_SIZE;
    return { resolution: size, aspectRatio: aspect(size) };
  },
  submit: (r) => ({
    path: '/videos',
    body: { ...pickParameters(r.extra, openAiVideoAdapter.parameters), model: r.model, prompt: r.prompt, seconds: String(r.durationSeconds), ...(r.seed !== undefined && { seed: r.seed }) },
  }),
  parseSubmit: (json) => ({ providerJobId: (json as OpenAiVideo).id }),
  status: (id) => ({ method: 'GET', path: `/videos/${encodeURIComponent(id)}` }),
  parseStatus(json): VideoStatus {
    const v = json as OpenAiVideo;
    if (v.status === 'completed') {
      return { state: 'succeeded', durationSeconds: v.seconds !== undefined ? Number(v.seconds) : null, resolution: v.size ?? null, aspectRatio: aspect(v.size), mimeType: 'video/mp4', download: v.id };
    }
    if (v.status === 'failed') return { state: 'failed', message: v.error?.message ?? 'The provider failed to render the video.', code: v.error?.code ?? null };
    return { state: 'running', progress: typeof v.progress === 'number' ? Math.min(1, Math.max(0, v.progress / 100)) : null };
  },
  content: (id) => ({ method: 'GET', path: `/videos/${encodeURIComponent(id)}/content` }),
  classifyError: (status, body, headers) => classifyByStatus(status, body, headers),
};
