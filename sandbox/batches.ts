import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import { directivesInText, parseDirectives, type Directives } from './directives';
import { readMultipart } from './media';

/**
 * The providers' batch wires (issue 56), kept in memory:
 *
 *   OpenAI (`/openai/v1`) and Azure OpenAI (`/azure/openai`):
 *     POST files (multipart `file`, `purpose: batch`), GET files/<id>, GET files/<id>/content, DELETE files/<id>,
 *     POST batches (`input_file_id`, `endpoint`, `completion_window: 24h`, `metadata`),
 *     GET batches/<id>, POST batches/<id>/cancel
 *   Anthropic (`/anthropic/v1`):
 *     POST messages/batches (`requests: [{custom_id, params}]`), GET messages/batches/<id>,
 *     POST messages/batches/<id>/cancel, GET messages/batches/<id>/results (JSONL), DELETE messages/batches/<id> (ended)
 *
 * A batch runs its requests one at a time through the provider's own chat path (`runItem`:
 * the same parsing, answers, per-request directives and bill as a direct call, billed at the
 * batch tier). Batch directives, in the connection's path or any request's text:
 *   batch_refuse       the batch's create is refused (400)
 *   batch_fail         the batch fails (OpenAI: `failed` with `errors`; Anthropic: every request errored)
 *   batch_expire       the window runs out after half the requests: the rest expire
 *   batch_item_ms=<ms> each request takes this long (a slow batch, to cancel mid-way)
 *   batch_check_status=<code>  OpenAI: the batch's status checks answer this HTTP status
 */
export type BatchItemRun = (input: { flavor: 'openai' | 'azure' | 'anthropic'; path: string; body: Record<string, unknown>; credential: string; requestId: string }) => { status: number; body: unknown };

/** A file, read only with the credential that uploaded it (or, for a batch's output, that created the batch). */
type StoredFile = { id: string; credential: string; purpose: string; filename: string; bytes: Buffer; createdAt: number };

type Outcome = { customId: string; status: number | null; body: unknown; unrun?: 'expired' | 'canceled' };

type SandboxBatch = {
  id: string; flavor: 'openai' | 'azure' | 'anthropic'; credential: string;
  endpoint: string; inputFileId: string | null; metadata: unknown;
  requests: Array<{ customId: string; url: string; body: Record<string, unknown> }>;
  directives: Directives;
  status: 'validating' | 'in_progress' | 'finalizing' | 'completed' | 'failed' | 'expired' | 'cancelling' | 'cancelled';
  outcomes: Outcome[];
  createdAt: number; inProgressAt: number | null; endedAt: number | null; cancellingAt: number | null;
  outputFileId: string | null; errorFileId: string | null;
  errors: Array<{ code: string; message: string; param: string | null; line: number | null }> | null;
};

export type BatchState = { files: Map<string, StoredFile>; batches: Map<string, SandboxBatch>; run: BatchItemRun };

export const createBatchState = (run: BatchItemRun): BatchState => ({ files: new Map(), batches: new Map(), run });

const seconds = (ms: number | null) => (ms === null ? null : Math.floor(ms / 1000));
const DAY_MS = 24 * 3_600_000;
const newId = (prefix: string) => `${prefix}${randomBytes(12).toString('hex')}`;

type BatchRoute =
  | { wire: 'openai'; flavor: 'openai' | 'azure'; op: 'upload' | 'file' | 'file_content' | 'file_delete' | 'create' | 'get' | 'cancel'; id?: string }
  | { wire: 'anthropic'; flavor: 'anthropic'; op: 'create' | 'get' | 'cancel' | 'results' | 'delete'; id?: string };

/** Which batch call a request is, or null. */
export function batchRouteFor(method: string, path: string): BatchRoute | null {
  let m: RegExpExecArray | null;
  if ((m = /^\/(openai\/v1|azure\/openai)\/(files|batches)(?:\/([^/]+))?(?:\/(content|cancel))?$/.exec(path))) {
    const flavor = m[1] === 'azure/openai' ? 'azure' : 'openai';
    const [, , what, id, tail] = m;
    if (what === 'files') {
      if (method === 'POST' && !id) return { wire: 'openai', flavor, op: 'upload' };
      if (method === 'GET' && id && !tail) return { wire: 'openai', flavor, op: 'file', id };
      if (method === 'GET' && id && tail === 'content') return { wire: 'openai', flavor, op: 'file_content', id };
      if (method === 'DELETE' && id && !tail) return { wire: 'openai', flavor, op: 'file_delete', id };
      return null;
    }
    if (method === 'POST' && !id) return { wire: 'openai', flavor, op: 'create' };
    if (method === 'GET' && id && !tail) return { wire: 'openai', flavor, op: 'get', id };
    if (method === 'POST' && id && tail === 'cancel') return { wire: 'openai', flavor, op: 'cancel', id };
    return null;
  }
  if ((m = /^\/anthropic\/v1\/messages\/batches(?:\/([^/]+))?(?:\/(cancel|results))?$/.exec(path))) {
    const [, id, tail] = m;
    if (method === 'POST' && !id) return { wire: 'anthropic', flavor: 'anthropic', op: 'create' };
    if (method === 'GET' && id && !tail) return { wire: 'anthropic', flavor: 'anthropic', op: 'get', id };
    if (method === 'POST' && id && tail === 'cancel') return { wire: 'anthropic', flavor: 'anthropic', op: 'cancel', id };
    if (method === 'GET' && id && tail === 'results') return { wire: 'anthropic', flavor: 'anthropic', op: 'results', id };
    if (method === 'DELETE' && id && !tail) return { wire: 'anthropic', flavor: 'anthropic', op: 'delete', id };
  }
  return null;
}

type Send = (status: number, payload: unknown, headers?: Record<string, string>) => void;

const openAIError = (send: Send, status: number, message: string, param: string | null = null) => send(status, { error: { message, type: 'invalid_request_error', param, code: null } });
const anthropicError = (send: Send, status: number, message: string) => send(status, { type: 'error', error: { type: status === 404 ? 'not_found_error' : 'invalid_request_error', message } });

async function readJson(req: http.IncomingMessage): Promise<Record<string, unknown> | null> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Serves one batch call; the credential was checked. */
export async function handleBatch(state: BatchState, route: BatchRoute, ctx: { req: http.IncomingMessage; res: http.ServerResponse; credential: string; pathDirectives: string; origin: string; send: Send }): Promise<void> {
  return route.wire === 'openai' ? openAIBatch(state, route, ctx) : anthropicBatch(state, route, ctx);
}

async function openAIBatch(state: BatchState, route: Extract<BatchRoute, { wire: 'openai' }>, ctx: Parameters<typeof handleBatch>[2]): Promise<void> {
  const { send } = ctx;
  if (route.op === 'upload') {
    const form = await readMultipart(ctx.req).catch(() => null);
    const upload = form?.files.find((f) => f.field === 'file');
    if (!form || !upload) return openAIError(send, 400, "Missing required parameter: 'file'.", 'file');
    if (form.fields.purpose !== 'batch') return openAIError(send, 400, `Invalid value for 'purpose': ${JSON.stringify(form.fields.purpose ?? null)}.`, 'purpose');
    const file: StoredFile = { id: newId('file-'), credential: ctx.credential, purpose: 'batch', filename: upload.filename, bytes: upload.bytes, createdAt: Date.now() };
    state.files.set(file.id, file);
    return send(200, presentFile(file));
  }
  if (route.op === 'file' || route.op === 'file_content' || route.op === 'file_delete') {
    const file = state.files.get(route.id!);
    if (!file || file.credential !== ctx.credential) return openAIError(send, 404, `No such File object: ${route.id}`, 'id');
    if (route.op === 'file') return send(200, presentFile(file));
    if (route.op === 'file_delete') {
      state.files.delete(file.id);
      return send(200, { id: file.id, object: 'file', deleted: true });
    }
    ctx.res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(file.bytes.length) });
    return void ctx.res.end(file.bytes);
  }
  if (route.op === 'create') {
    const body = await readJson(ctx.req);
    if (!body) return openAIError(send, 400, 'We could not parse the JSON body of your request.');
    const found = typeof body.input_file_id === 'string' ? state.files.get(body.input_file_id) : undefined;
    const file = found?.credential === ctx.credential ? found : undefined;
    if (!file) return openAIError(send, 400, `Invalid 'input_file_id': ${JSON.stringify(body.input_file_id ?? null)}.`, 'input_file_id');
    const endpoint = String(body.endpoint ?? '');
    const endpoints = route.flavor === 'azure' ? ['/chat/completions', '/embeddings'] : ['/v1/chat/completions', '/v1/embeddings', '/v1/responses'];
    if (!endpoints.includes(endpoint)) return openAIError(send, 400, `Invalid 'endpoint': ${JSON.stringify(endpoint)}.`, 'endpoint');
    if (body.completion_window !== '24h') return openAIError(send, 400, "Invalid 'completion_window': only '24h' is supported.", 'completion_window');
    const requests: SandboxBatch['requests'] = [];
    const errors: NonNullable<SandboxBatch['errors']> = [];
    for (const [i, text] of file.bytes.toString('utf8').split('\n').entries()) {
      if (text.trim() === '') continue;
      let line: { custom_id?: unknown; method?: unknown; url?: unknown; body?: unknown };
      try {
        line = JSON.parse(text) as typeof line;
      } catch {
        errors.push({ code: 'invalid_json_line', message: 'This line is not parseable as valid JSON.', param: null, line: i + 1 });
        continue;
      }
      if (typeof line.custom_id !== 'string' || line.method !== 'POST' || line.url !== endpoint || typeof line.body !== 'object' || line.body === null) {
        errors.push({ code: 'invalid_request', message: `Line ${i + 1} is not a request to ${endpoint}.`, param: null, line: i + 1 });
        continue;
      }
      requests.push({ customId: line.custom_id, url: endpoint, body: line.body as Record<string, unknown> });
    }
    if (batchDirectives(ctx, requests).batchRefuse) return openAIError(send, 400, 'sandbox: simulated refusal of the batch.');
    const batch = newBatch(state, route.flavor, ctx, { endpoint, inputFileId: file.id, metadata: body.metadata ?? null, requests });
    if (errors.length > 0 || requests.length === 0) {
      batch.status = 'failed';
      batch.endedAt = Date.now();
      batch.errors = errors.length > 0 ? errors : [{ code: 'empty_file', message: 'The input file has no requests.', param: null, line: null }];
    } else {
      void runBatch(state, batch);
    }
    return send(200, presentOpenAI(batch));
  }
  const batch = state.batches.get(route.id!);
  if (!batch || batch.flavor === 'anthropic' || batch.credential !== ctx.credential) return openAIError(send, 404, `No batch found with id '${route.id}'.`);
  if (route.op === 'get' && batch.directives.batchCheckStatus) return openAIError(send, batch.directives.batchCheckStatus, `sandbox: simulated ${batch.directives.batchCheckStatus} on a status check.`);
  if (route.op === 'cancel') {
    if (batch.status !== 'validating' && batch.status !== 'in_progress') return openAIError(send, 409, `Cannot cancel a batch with status '${batch.status}'.`);
    batch.status = 'cancelling';
    batch.cancellingAt = Date.now();
  }
  return send(200, presentOpenAI(batch));
}

async function anthropicBatch(state: BatchState, route: Extract<BatchRoute, { wire: 'anthropic' }>, ctx: Parameters<typeof handleBatch>[2]): Promise<void> {
  const { send } = ctx;
  if (route.op === 'create') {
    const body = await readJson(ctx.req);
    const requests = body?.requests;
    if (!Array.isArray(requests) || requests.length === 0) return anthropicError(send, 400, 'requests: Field required');
    const seen = new Set<string>();
    const parsed: SandboxBatch['requests'] = [];
    for (const [i, r] of (requests as Array<{ custom_id?: unknown; params?: unknown }>).entries()) {
      if (typeof r?.custom_id !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(r.custom_id)) return anthropicError(send, 400, `requests.${i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'`);
      if (seen.has(r.custom_id)) return anthropicError(send, 400, `Duplicate custom_id ${r.custom_id}.`);
      if (typeof r.params !== 'object' || r.params === null) return anthropicError(send, 400, `requests.${i}.params: Field required`);
      seen.add(r.custom_id);
      parsed.push({ customId: r.custom_id, url: '/v1/messages', body: r.params as Record<string, unknown> });
    }
    if (batchDirectives(ctx, parsed).batchRefuse) return anthropicError(send, 400, 'sandbox: simulated refusal of the batch.');
    const batch = newBatch(state, 'anthropic', ctx, { endpoint: '/v1/messages', inputFileId: null, metadata: null, requests: parsed });
    void runBatch(state, batch);
    return send(200, presentAnthropic(batch, ctx.origin));
  }
  const batch = state.batches.get(route.id!);
  if (!batch || batch.flavor !== 'anthropic' || batch.credential !== ctx.credential) return anthropicError(send, 404, `No message batch found with id '${route.id}'.`);
  if (route.op === 'cancel') {
    if (batch.status === 'in_progress') {
      batch.status = 'cancelling';
      batch.cancellingAt = Date.now();
    }
    return send(200, presentAnthropic(batch, ctx.origin));
  }
  if (route.op === 'delete') {
    if (batch.endedAt === null) return anthropicError(send, 400, `Batch ${batch.id} is still being processed; cancel it, then delete it once it has ended.`);
    state.batches.delete(batch.id);
    return send(200, { id: batch.id, type: 'message_batch_deleted' });
  }
  if (route.op === 'results') {
    if (batch.endedAt === null) return anthropicError(send, 400, `Batch ${batch.id} has not ended; its results are not available yet.`);
    ctx.res.writeHead(200, { 'content-type': 'application/binary' });
    for (const o of batch.outcomes) {
      const result = o.unrun ? { type: o.unrun }
        : o.status !== null && o.status >= 200 && o.status < 300 ? { type: 'succeeded', message: o.body }
          : { type: 'errored', error: o.body };
      ctx.res.write(`${JSON.stringify({ custom_id: o.customId, result })}\n`);
    }
    return void ctx.res.end();
  }
  return send(200, presentAnthropic(batch, ctx.origin));
}

/** A batch's directives: the connection's path's, and any of its requests' texts'. */
function batchDirectives(ctx: Parameters<typeof handleBatch>[2], requests: SandboxBatch['requests']): Directives {
  const texts = requests.map((r) => directivesInText(JSON.stringify(r.body))).join(',');
  return parseDirectives(`${ctx.pathDirectives},${texts}`);
}

function newBatch(state: BatchState, flavor: SandboxBatch['flavor'], ctx: Parameters<typeof handleBatch>[2], input: Pick<SandboxBatch, 'endpoint' | 'inputFileId' | 'metadata' | 'requests'>): SandboxBatch {
  const batch: SandboxBatch = {
    id: newId(flavor === 'anthropic' ? 'msgbatch_' : 'batch_'), flavor, credential: ctx.credential, ...input,
    directives: batchDirectives(ctx, input.requests),
    status: 'in_progress', outcomes: [], createdAt: Date.now(), inProgressAt: Date.now(), endedAt: null, cancellingAt: null,
    outputFileId: null, errorFileId: null, errors: null,
  };
  state.batches.set(batch.id, batch);
  return batch;
}

/** Runs a batch's requests one at a time, then ends it as its directives and its cancel say. */
async function runBatch(state: BatchState, batch: SandboxBatch): Promise<void> {
  const { directives } = batch;
  const stopAt = directives.batchExpire ? Math.floor(batch.requests.length / 2) : batch.requests.length;
  for (const [i, request] of batch.requests.entries()) {
    await new Promise((r) => setTimeout(r, directives.batchItemMs ?? 0));
    if (batch.status === 'cancelling' || i >= stopAt) break;
    if (directives.batchFail) {
      if (batch.flavor === 'anthropic') batch.outcomes.push({ customId: request.customId, status: 500, body: { type: 'error', error: { type: 'api_error', message: 'sandbox: simulated batch failure' } } });
      continue;
    }
    const path = batch.flavor === 'anthropic' ? '/anthropic/v1/messages'
      : batch.flavor === 'azure' ? `/azure/openai/deployments/${encodeURIComponent(String(request.body.model ?? ''))}${request.url}`
        : `/openai${request.url}`;
    const answered = state.run({ flavor: batch.flavor, path, body: request.body, credential: batch.credential, requestId: `${batch.id}:${request.customId}` });
    batch.outcomes.push({ customId: request.customId, ...answered });
  }
  const done = new Set(batch.outcomes.map((o) => o.customId));
  const unrun = batch.status === 'cancelling' ? 'canceled' : 'expired';
  for (const request of batch.requests) if (!done.has(request.customId)) batch.outcomes.push({ customId: request.customId, status: null, body: null, unrun });
  batch.endedAt = Date.now();
  if (batch.flavor === 'anthropic') {
    batch.status = batch.status === 'cancelling' ? 'cancelled' : 'completed';
    return;
  }
  if (directives.batchFail) {
    batch.status = 'failed';
    batch.errors = [{ code: 'batch_failed', message: 'sandbox: simulated batch failure', param: null, line: null }];
    return;
  }
  const line = (o: Outcome) => ({
    id: newId('batch_req_'), custom_id: o.customId,
    response: o.unrun ? null : { status_code: o.status, request_id: randomBytes(8).toString('hex'), body: o.body },
    error: o.unrun ? { code: o.unrun === 'expired' ? 'batch_expired' : 'batch_cancelled', message: o.unrun === 'expired' ? 'This request could not be executed before the completion window expired.' : 'This request was not executed because the batch was cancelled.' } : null,
  });
  const ok = batch.outcomes.filter((o) => !o.unrun && o.status !== null && o.status >= 200 && o.status < 300);
  const bad = batch.outcomes.filter((o) => !ok.includes(o));
  const keep = (outcomes: Outcome[], suffix: string) => {
    if (outcomes.length === 0) return null;
    const file: StoredFile = { id: newId('file-'), credential: batch.credential, purpose: 'batch_output', filename: `${batch.id}_${suffix}.jsonl`, bytes: Buffer.from(outcomes.map((o) => `${JSON.stringify(line(o))}\n`).join('')), createdAt: Date.now() };
    state.files.set(file.id, file);
    return file.id;
  };
  batch.outputFileId = keep(ok, 'output');
  batch.errorFileId = keep(bad, 'error');
  batch.status = batch.status === 'cancelling' ? 'cancelled' : stopAt < batch.requests.length ? 'expired' : 'completed';
}

const presentFile = (file: StoredFile) => ({ id: file.id, object: 'file', bytes: file.bytes.length, created_at: seconds(file.createdAt), filename: file.filename, purpose: file.purpose, status: 'processed', expires_at: null, status_details: null });

function presentOpenAI(batch: SandboxBatch) {
  const succeeded = batch.outcomes.filter((o) => !o.unrun && o.status !== null && o.status >= 200 && o.status < 300).length;
  const failed = batch.outcomes.filter((o) => !o.unrun).length - succeeded;
  const ended = batch.endedAt !== null;
  return {
    id: batch.id, object: 'batch', endpoint: batch.endpoint, errors: batch.errors ? { object: 'list', data: batch.errors } : null,
    input_file_id: batch.inputFileId, completion_window: '24h', status: batch.status,
    output_file_id: batch.outputFileId, error_file_id: batch.errorFileId,
    created_at: seconds(batch.createdAt), in_progress_at: seconds(batch.inProgressAt), expires_at: seconds(batch.createdAt + DAY_MS),
    finalizing_at: ended && batch.status !== 'failed' ? seconds(batch.endedAt) : null,
    completed_at: batch.status === 'completed' ? seconds(batch.endedAt) : null,
    failed_at: batch.status === 'failed' ? seconds(batch.endedAt) : null,
    expired_at: batch.status === 'expired' ? seconds(batch.endedAt) : null,
    cancelling_at: seconds(batch.cancellingAt), cancelled_at: batch.status === 'cancelled' ? seconds(batch.endedAt) : null,
    request_counts: { total: batch.requests.length, completed: succeeded, failed }, metadata: batch.metadata,
  };
}

function presentAnthropic(batch: SandboxBatch, origin: string) {
  const count = (pred: (o: Outcome) => boolean) => batch.outcomes.filter(pred).length;
  const ended = batch.endedAt !== null;
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    id: batch.id, type: 'message_batch',
    processing_status: ended ? 'ended' : batch.status === 'cancelling' ? 'canceling' : 'in_progress',
    request_counts: {
      processing: ended ? 0 : batch.requests.length - batch.outcomes.length,
      succeeded: count((o) => !o.unrun && o.status !== null && o.status >= 200 && o.status < 300),
      errored: count((o) => !o.unrun && (o.status === null || o.status < 200 || o.status >= 300)),
      canceled: count((o) => o.unrun === 'canceled'), expired: count((o) => o.unrun === 'expired'),
    },
    ended_at: iso(batch.endedAt), created_at: iso(batch.createdAt), expires_at: iso(batch.createdAt + DAY_MS),
    archived_at: null, cancel_initiated_at: iso(batch.cancellingAt),
    results_url: ended ? `${origin}/anthropic/v1/messages/batches/${batch.id}/results` : null,
  };
}
