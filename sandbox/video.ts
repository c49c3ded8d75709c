import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import { directivesInText, parseDirectives, type Directives } from './directives';

/**
 * Video renders as the providers run them: OpenAI's videos API (create, retrieve, content) and
 * Gemini Veo's long-running operations. A render takes `render_ms` (default 1.5 s), reports
 * progress as it goes (unless `no_progress`), and can fail (`video_fail`) or never finish.
 * An `Idempotency-Key` on create returns the render already made for that key. A submit can
 * be answered late (`submit_delay_ms`; a caller that gives up first starts no render), taken
 * and answered with a 200 whose body is cut short (`submit_garbled`), status
 * checks can be refused (`check_status=404`), and Veo can point the download elsewhere
 * (`download_uri`).
 *
 * What is asked is what is rendered, as the providers bill it: OpenAI's `seconds` (4 when
 * unsaid) and `size` (1280x720 here); Veo's `durationSeconds` (8 when unsaid), `sampleCount`
 * videos (1 to 4) and `resolution`. Veo's parameters are checked as the Gemini API checks them
 * (an unknown one, or a value the model does not take, is a 400 INVALID_ARGUMENT), and its
 * finished operation says only where each sample is: no duration, resolution or aspect ratio.
 */
export type Render = { id: string; model: string; seconds: number; samples: number; size: string; startedAt: number; directives: Directives; checksRefused: number };

const DEFAULT_RENDER_MS = 1500;

/**
 * `abandonedSubmits`: slow submits whose caller hung up before the answer (no render made);
 * `renderedSeconds`: seconds of video rendered (each sample counted), what the provider bills.
 */
export type VideoState = {
  renders: Map<string, Render>; byIdempotencyKey: Map<string, string>; submits: number; abandonedSubmits: number; renderedSeconds: number;
  /** Told of each render started, with the submit that started it (the bill). */
  onRender?(render: Readonly<Render>, req: http.IncomingMessage): void;
};

export function createVideoState(onRender?: VideoState['onRender']): VideoState {
  return { renders: new Map(), byIdempotencyKey: new Map(), submits: 0, abandonedSubmits: 0, renderedSeconds: 0, onRender };
}

/** What one submit asks to render. */
type Asked = { model: string; prompt: string; seconds: number; samples: number; size: string };

/** A small deterministic stand-in for an MP4 file. */
export function videoBytes(id: string): Buffer {
  return Buffer.concat([Buffer.from([0, 0, 0, 0x18]), Buffer.from('ftypmp42'), Buffer.alloc(64 * 1024, `sandbox-video:${id};`)]);
}

function phase(r: Render): { done: boolean; failed: boolean; progress: number } {
  const renderMs = r.directives.renderMs ?? DEFAULT_RENDER_MS;
  const elapsed = Date.now() - r.startedAt;
  if (r.directives.neverFinish) return { done: false, failed: false, progress: Math.min(0.99, elapsed / renderMs) };
  if (elapsed < renderMs) return { done: false, failed: false, progress: elapsed / renderMs };
  return { done: true, failed: r.directives.videoFail === true, progress: 1 };
}

function create(state: VideoState, req: http.IncomingMessage, asked: Asked, directives: Directives): Render {
  const key = req.headers['idempotency-key'] as string | undefined;
  const known = key ? state.byIdempotencyKey.get(key) : undefined;
  if (known) return state.renders.get(known)!;
  const render: Render = { id: randomBytes(10).toString('hex'), model: asked.model, seconds: asked.seconds, samples: asked.samples, size: asked.size, startedAt: Date.now(), directives, checksRefused: 0 };
  state.renders.set(render.id, render);
  if (key) state.byIdempotencyKey.set(key, render.id);
  state.submits += 1;
  state.renderedSeconds += asked.seconds * asked.samples;
  state.onRender?.(render, req);
  return render;
}

type Send = (status: number, payload: unknown, headers?: Record<string, string>) => void;

/** Accepts a submit, `submit_delay_ms` late; a caller that hung up meanwhile starts no render. */
function accept(state: VideoState, req: http.IncomingMessage, res: http.ServerResponse, asked: Asked, pathDirectives: string, answer: (r: Render) => void): void {
  const directives = parseDirectives(`${pathDirectives},${directivesInText(asked.prompt)}`);
  const go = () => answer(create(state, req, asked, directives));
  if (directives.submitHang) {
    const key = req.headers['idempotency-key'] as string | undefined;
    // Taken, and the answer lost: the caller cannot know whether a render started.
    if (!key || !state.byIdempotencyKey.has(key)) {
      create(state, req, asked, directives);
      return;
    }
    return go();
  }
  if (directives.submitGarbled) {
    // Taken, and answered 200 with a body cut short: the render runs, its id is unreadable.
    create(state, req, asked, directives);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"id": "video_');
    return;
  }
  if (!directives.submitDelayMs) return go();
  const timer = setTimeout(go, directives.submitDelayMs);
  res.once('close', () => {
    if (res.writableFinished) return;
    clearTimeout(timer);
    state.abandonedSubmits += 1;
  });
}

/** A status check refused by `check_status` (the first `times` only, if given), in the provider's error shape, or null. */
function refusedCheck(r: Render | undefined, google: boolean): [number, unknown] | null {
  const status = r?.directives.checkStatus;
  if (!r || !status || (r.directives.times !== undefined && r.checksRefused >= r.directives.times)) return null;
  r.checksRefused += 1;
  const message = `sandbox: status check refused with ${status}`;
  return [status, google ? { error: { code: status, message, status: status === 404 ? 'NOT_FOUND' : 'FAILED_PRECONDITION' } } : { error: { message, type: 'invalid_request_error', code: status === 404 ? 'not_found' : null } }];
}

/** Serves a video path if it is one; answers whether it did. */
export function handleVideo(state: VideoState, req: http.IncomingMessage, res: http.ServerResponse, path: string, body: Record<string, unknown> | null, pathDirectives: string, origin: string, send: Send): boolean {
  let m: RegExpExecArray | null;
  const method = req.method ?? 'GET';

  // OpenAI
  if (method === 'POST' && path === '/openai/v1/videos') {
    const asked = { model: String(body?.model ?? 'sora-2'), prompt: String(body?.prompt ?? ''), seconds: Number(body?.seconds ?? 4), samples: 1, size: String(body?.size ?? '1280x720') };
    accept(state, req, res, asked, pathDirectives, (r) => send(200, openAiVideo(r)));
    return true;
  }
  if (method === 'GET' && (m = /^\/openai\/v1\/videos\/([^/]+)$/.exec(path))) {
    const r = state.renders.get(m[1]!);
    const refused = refusedCheck(r, false);
    if (!r) send(404, { error: { message: 'Video not found', type: 'invalid_request_error', code: 'not_found' } });
    else if (refused) send(...refused);
    else send(200, openAiVideo(r));
    return true;
  }
  if (method === 'GET' && (m = /^\/openai\/v1\/videos\/([^/]+)\/content$/.exec(path))) {
    const r = state.renders.get(m[1]!);
    if (!r || !phase(r).done || phase(r).failed) send(404, { error: { message: 'Video content not found', type: 'invalid_request_error' } });
    else sendVideo(res, r);
    return true;
  }

  // Gemini Veo
  if (method === 'POST' && (m = /^\/google\/v1beta\/models\/([^/:]+):predictLongRunning$/.exec(path))) {
    const instances = (body?.instances as Array<{ prompt?: string }> | undefined) ?? [];
    const parameters = (body?.parameters as Record<string, unknown> | undefined) ?? {};
    const refused = veoRefusal(m[1]!, parameters);
    if (refused) {
      send(400, { error: { code: 400, message: refused, status: 'INVALID_ARGUMENT' } });
      return true;
    }
    const asked = { model: m[1]!, prompt: instances[0]?.prompt ?? '', seconds: Number(parameters.durationSeconds ?? VEO_DEFAULT_SECONDS), samples: Number(parameters.sampleCount ?? 1), size: String(parameters.resolution ?? '720p') };
    accept(state, req, res, asked, pathDirectives, (r) => send(200, { name: `models/${r.model}/operations/${r.id}` }));
    return true;
  }
  if (method === 'GET' && (m = /^\/google\/v1beta\/models\/([^/]+)\/operations\/([^/]+)$/.exec(path))) {
    const r = state.renders.get(m[2]!);
    if (!r) {
      send(404, { error: { code: 404, message: 'Operation not found', status: 'NOT_FOUND' } });
      return true;
    }
    const refused = refusedCheck(r, true);
    if (refused) {
      send(...refused);
      return true;
    }
    const p = phase(r);
    const name = `models/${r.model}/operations/${r.id}`;
    if (!p.done) send(200, { name, done: false, ...(!r.directives.noProgress && { metadata: { progressPercent: Math.round(p.progress * 100) } }) });
    else if (p.failed) send(200, { name, done: true, error: { code: 13, message: 'sandbox: the render failed' } });
    else {
      // Veo's answer: where each sample is, and nothing about its length or look.
      const generatedSamples = Array.from({ length: r.samples }, (_, i) => ({ video: { uri: r.directives.downloadUri ?? `${origin}/google/v1beta/files/${r.id}${i > 0 ? `-${i}` : ''}:download?alt=media` } }));
      send(200, { name, done: true, response: { '@type': 'type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse', generateVideoResponse: { generatedSamples } } });
    }
    return true;
  }
  if (method === 'GET' && (m = /^\/google\/v1beta\/files\/([^/:-]+)(?:-\d+)?:download$/.exec(path))) {
    const r = state.renders.get(m[1]!);
    if (!r || !phase(r).done || phase(r).failed) send(404, { error: { code: 404, message: 'File not found', status: 'NOT_FOUND' } });
    else sendVideo(res, r);
    return true;
  }
  return false;
}

/** What Veo renders when `durationSeconds` is not given. */
const VEO_DEFAULT_SECONDS = 8;
/** The parameters the Gemini API takes for Veo; any other is refused. */
const VEO_PARAMETERS = ['aspectRatio', 'negativePrompt', 'personGeneration', 'durationSeconds', 'resolution', 'sampleCount', 'seed'];

/** Why the Gemini API would refuse these Veo parameters, or null (Veo 2: 5 to 8 s at 720p; Veo 3: 4, 6 or 8 s, 720p or 1080p). */
function veoRefusal(model: string, parameters: Record<string, unknown>): string | null {
  const unknown = Object.keys(parameters).find((k) => !VEO_PARAMETERS.includes(k));
  if (unknown) return `\`${unknown}\` isn't supported by this model. Please remove it or refer to the Gemini API documentation for supported usage.`;
  const veo2 = model.startsWith('veo-2');
  const seconds = parameters.durationSeconds;
  if (seconds !== undefined && !(veo2 ? [5, 6, 7, 8] : [4, 6, 8]).includes(Number(seconds))) return `The requested duration ${String(seconds)} is not supported by ${model}.`;
  const samples = parameters.sampleCount;
  if (samples !== undefined && !(Number.isInteger(samples) && Number(samples) >= 1 && Number(samples) <= 4)) return 'sampleCount must be between 1 and 4.';
  const resolution = parameters.resolution;
  if (resolution !== undefined && !(veo2 ? ['720p'] : ['720p', '1080p']).includes(String(resolution))) return `The requested resolution ${String(resolution)} is not supported by ${model}.`;
  const aspect = parameters.aspectRatio;
  if (aspect !== undefined && !['16:9', '9:16'].includes(String(aspect))) return `The requested aspect ratio ${String(aspect)} is not supported.`;
  return null;
}

function sendVideo(res: http.ServerResponse, r: Render): void {
  setTimeout(() => {
    res.writeHead(200, { 'content-type': 'video/mp4' });
    res.end(videoBytes(r.id));
  }, r.directives.contentDelayMs ?? 0);
}

function openAiVideo(r: Render) {
  const p = phase(r);
  return {
    id: r.id,
    object: 'video',
    model: r.model,
    created_at: Math.floor(r.startedAt / 1000),
    status: !p.done ? (p.progress < 0.05 ? 'queued' : 'in_progress') : p.failed ? 'failed' : 'completed',
    progress: r.directives.noProgress && !p.done ? 0 : Math.round(p.progress * 100),
    seconds: String(r.seconds),
    size: r.size,
    error: p.done && p.failed ? { code: 'video_generation_failed', message: 'sandbox: the render failed' } : null,
  };
}
