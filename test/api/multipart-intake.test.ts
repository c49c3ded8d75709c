import { createHash } from 'node:crypto';
import { socketUpload } from '../helpers/socket-upload';
import { createReadStream, existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import Router from '@koa/router';
import busboy from 'busboy';
import Koa from 'koa';
import { request } from 'undici';
import type { GatewayState } from '../../api/context';
import { bodyLimit, jsonBody } from '../../api/middleware/body';
import { errorHandler } from '../../api/middleware/error-handler';
import { multipartBody, unlessMultipartRoute } from '../../api/middleware/multipart';
import { requestContext } from '../../api/middleware/request-context';
import { multipartForward, spoolRoot, sweepSpool, type SpooledMultipart } from '../../core/http/multipart';
import { createLogger } from '../../core/logger';

const MB = 1_000_000;

type Parsed = { fields: Record<string, string[]>; files: Array<{ field: string; filename: string; contentType: string; size: number; sha256: string }> };

function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

async function fileSha(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Parses a multipart request with busboy, hashing files as they stream (never buffered). */
function parseMultipart(req: http.IncomingMessage): Promise<Parsed> {
  return new Promise((resolve, reject) => {
    const parsed: Parsed = { fields: {}, files: [] };
    const parser = busboy({ headers: req.headers });
    parser.on('field', (name, value) => (parsed.fields[name] ??= []).push(value));
    parser.on('file', (field, stream, info) => {
      const hash = createHash('sha256');
      let size = 0;
      stream.on('data', (c: Buffer) => {
        size += c.length;
        hash.update(c);
      });
      stream.on('end', () => parsed.files.push({ field, filename: info.filename ?? '', contentType: info.mimeType, size, sha256: hash.digest('hex') }));
    });
    parser.on('close', () => resolve(parsed));
    parser.on('error', reject);
    req.pipe(parser);
  });
}

/** Polls until `check` holds (spool removal runs after the response is written). */
async function eventually(check: () => boolean | Promise<boolean>, ms = 3000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

v8.setFlagsFromString('--expose-gc');
// A collection finds dead ArrayBuffers at once, but frees their memory on a background thread
// afterwards, and process.memoryUsage().arrayBuffers counts them until then: sampled right after
// gc(), a fast upload's garbage (socket reads, the client's copies of each chunk) read as held,
// tens of MB on Node 24. Freed in the collection itself, a sample counts only what is retained.
v8.setFlagsFromString('--no-concurrent-array-buffer-sweeping');
const gc = vm.runInNewContext('gc') as () => void;

/**
 * Runs `work` while sampling memory after a full collection: what is retained, not garbage
 * waiting for the collector. Answers the peak growth of RSS and of what is held (heap plus
 * Buffers). Samples come every 100 ms, or four times as long as the last collection took when
 * that is longer: on a loaded machine back-to-back full collections would leave the upload
 * under test (client and server share this process) almost no time to run.
 */
async function memoryPeak<T>(work: () => Promise<T>): Promise<{ result: T; rss: number; held: number }> {
  const held = () => {
    const m = process.memoryUsage();
    return m.heapUsed + m.arrayBuffers;
  };
  gc();
  const before = { rss: process.memoryUsage().rss, held: held() };
  const peak = { ...before };
  let timer: NodeJS.Timeout | undefined;
  const sample = () => {
    const started = performance.now();
    gc();
    peak.rss = Math.max(peak.rss, process.memoryUsage().rss);
    peak.held = Math.max(peak.held, held());
    return performance.now() - started;
  };
  const next = (took: number) => {
    timer = setTimeout(() => next(sample()), Math.max(100, took * 4));
  };
  next(0);
  try {
    const result = await work();
    sample();
    return { result, rss: peak.rss - before.rss, held: peak.held - before.held };
  } finally {
    clearTimeout(timer);
  }
}

const BOUNDARY = '----gw-test-boundary-7d1f';
/** The head of one file part, sent before the raw socket's filler bytes. */
const FILE_PART_HEAD = Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n`);

/** A streamed multipart body with one file of `size` bytes made of a reused chunk (no Content-Length: chunked). */
function streamedUpload(field: string, size: number): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const head = encoder.encode(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="model"\r\n\r\ngpt-image-1\r\n` +
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${field}"; filename="big.png"\r\nContent-Type: image/png\r\n\r\n`,
  );
  const tail = encoder.encode(`\r\n--${BOUNDARY}--\r\n`);
  const chunk = new Uint8Array(MB).fill(0x41);
  let sent = -1;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent === -1) {
        sent = 0;
        return controller.enqueue(head);
      }
      if (sent >= size) {
        controller.enqueue(tail);
        return controller.close();
      }
      const n = Math.min(chunk.length, size - sent);
      sent += n;
      // The same bytes each time (never changed): the client allocates nothing per chunk.
      controller.enqueue(n === chunk.length ? chunk : chunk.subarray(0, n));
    },
  });
}

describe('multipart intake: streamed, counted, spooled to disk, re-sendable', () => {
  let dataDir: string;
  let spool: string;
  let server: http.Server;
  let base: string;
  let echo: http.Server;
  let echoUrl: string;
  /** What the last multipart route saw, with the spooled files' state while the request was live. */
  let seen: { multipart: SpooledMultipart; onDisk: Array<{ exists: boolean; sha256: string }> } | null = null;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'gw-multipart-'));
    spool = spoolRoot(dataDir);

    const router = new Router<GatewayState>();
    router.use(unlessMultipartRoute(jsonBody()));
    const record: Koa.Middleware<GatewayState> = async (ctx) => {
      const multipart = ctx.state.multipart!;
      const onDisk = await Promise.all(multipart.files.map(async (f) => ({ exists: existsSync(f.path), sha256: await fileSha(f.path) })));
      seen = { multipart, onDisk };
      ctx.body = { fields: multipart.fields, files: multipart.files.map((f, i) => ({ ...f, sha256: onDisk[i]!.sha256 })), ignored: multipart.ignored };
    };
    // The real path, so bodyLimit gives it the spec's 51 MB.
    router.post(
      '/v1/images/edits',
      multipartBody({ spoolDir: spool, maxFileBytes: 51 * MB, files: ['image', 'mask'], fields: ['model', 'prompt', 'n', 'tags[]'] }),
      record,
    );
    router.post(
      '/small',
      multipartBody({ spoolDir: spool, maxBodyBytes: 2 * MB, maxFileBytes: 100_000, files: ['image', 'file'], fields: ['model'], maxFields: 4 }),
      record,
    );
    // Forwards the spooled body twice to the echo server (two "failover attempts") and answers what it parsed.
    router.post(
      '/forward',
      multipartBody({ spoolDir: spool, maxFileBytes: 10 * MB, files: ['image', 'mask'], fields: ['model', 'prompt', 'fallbacks'] }),
      async (ctx) => {
        const attempts: Parsed[] = [];
        for (const model of ['dall-e-2', 'gpt-image-1']) {
          const body = await multipartForward(ctx.state.multipart!, { model, fallbacks: null });
          const res = await request(echoUrl, { method: 'POST', body });
          attempts.push((await res.body.json()) as Parsed);
        }
        ctx.body = { attempts };
      },
    );
    router.post('/json', (ctx) => void (ctx.body = { got: ctx.state.body }));

    const app = new Koa<GatewayState>();
    app.silent = true;
    app.use(requestContext(createLogger('silent')));
    app.use(errorHandler());
    app.use(bodyLimit());
    app.use(router.routes());
    server = http.createServer(app.callback());
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    echo = http.createServer((req, res) => {
      parseMultipart(req).then(
        (parsed) => res.writeHead(200, { 'content-type': 'application/json', 'x-content-length': req.headers['content-length'] ?? '' }).end(JSON.stringify(parsed)),
        (err: Error) => res.writeHead(400).end(err.message),
      );
    });
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    echoUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}/`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    await new Promise((r) => echo.close(r));
    await rm(dataDir, { recursive: true, force: true });
  });
  beforeEach(() => (seen = null));

  const spoolIsEmpty = async () => (await readdir(spool).catch(() => [])).length === 0;

  it('delivers fields and files spooled to disk, and removes the spool after the response', async () => {
    const image = Buffer.alloc(300_000, 7);
    const mask = Buffer.from('mask-bytes');
    const form = new FormData();
    form.append('model', 'gpt-image-1');
    form.append('prompt', 'a cat in a hat');
    form.append('tags[]', 'a');
    form.append('tags[]', 'b');
    form.append('unknown_param', 'ignored, not a 400');
    form.append('image', new Blob([image], { type: 'image/png' }), 'cat.png');
    form.append('mask', new Blob([mask], { type: 'image/png' }), 'mask.png');
    const res = await fetch(`${base}/v1/images/edits`, { method: 'POST', body: form });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { fields: Record<string, unknown>; files: Array<Record<string, unknown>>; ignored: string[] };
    expect(body.fields).toEqual({ model: 'gpt-image-1', prompt: 'a cat in a hat', 'tags[]': ['a', 'b'] });
    expect(body.ignored).toEqual(['unknown_param']);
    expect(body.files).toEqual([
      { field: 'image', filename: 'cat.png', contentType: 'image/png', size: image.length, sha256: sha256(image), path: expect.any(String) },
      { field: 'mask', filename: 'mask.png', contentType: 'image/png', size: mask.length, sha256: sha256(mask), path: expect.any(String) },
    ]);
    // On disk under <data dir>/spool/<request id>/ while the request was live, gone after.
    const requestId = res.headers.get('x-gw-request-id')!;
    expect(seen!.onDisk.every((f) => f.exists)).toBe(true);
    for (const file of seen!.multipart.files) expect(path.dirname(file.path)).toBe(path.join(spool, requestId));
    await eventually(spoolIsEmpty);
  });

  it('refuses another content type with 400 invalid_request_error; JSON routes still get their parsed body', async () => {
    const res = await fetch(`${base}/v1/images/edits`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"x"}' });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: { message: expect.stringContaining('multipart/form-data'), type: 'invalid_request_error', code: null } });

    const json = await fetch(`${base}/json`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
    expect(await json.json()).toEqual({ got: { a: 1 } });
  });

  it('answers 413 from the Content-Length, readable by fetch, and by a client that sends the whole body first (lingering close)', async () => {
    const form = new FormData();
    form.append('model', 'gpt-image-1');
    form.append('image', new Blob([Buffer.alloc(52 * MB)], { type: 'image/png' }), 'big.png');
    const res = await fetch(`${base}/v1/images/edits`, { method: 'POST', body: form });
    expect(res.status).toBe(413);
    expect(res.headers.get('connection')).toBe('close');
    expect(await res.json()).toEqual({ error: { message: expect.any(String), type: 'request_too_large', code: null } });

    const outcome = await socketUpload(`${base}/v1/images/edits`, { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, 52 * MB, { paceMs: 2, fill: 'a', preamble: FILE_PART_HEAD });
    expect(outcome.error).toBeNull();
    expect(outcome.sent).toBe(52 * MB);
    const [head, text] = outcome.answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 413 /);
    expect(JSON.parse(text!).error.type).toBe('request_too_large');
    expect(await spoolIsEmpty()).toBe(true);
  });

  it('answers 413 for a chunked body once the counted bytes pass the limit, without holding the file in memory', async () => {
    // 60 MB file, no Content-Length: the limit (51 MB) is met while the file is being spooled.
    const { result: res, rss, held } = await memoryPeak(async () => {
      const answer = await fetch(`${base}/v1/images/edits`, {
        method: 'POST',
        headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
        body: streamedUpload('image', 60 * MB),
        duplex: 'half',
      } as RequestInit & { duplex: 'half' });
      return { status: answer.status, body: (await answer.json()) as { error: { type: string } } };
    });
    expect(res.status).toBe(413);
    expect(res.body.error.type).toBe('request_too_large');
    expect(seen).toBeNull();
    // 51 MB went to disk before the refusal; memory held grew by far less than that (sockets and streams in flight).
    expect(held).toBeLessThan(20 * MB);
    expect(rss).toBeLessThan(30 * MB);
    await eventually(spoolIsEmpty);
  });

  it('spools a large file to disk without growing memory by its size', async () => {
    const { result: body, rss, held } = await memoryPeak(async () => {
      const res = await fetch(`${base}/v1/images/edits`, {
        method: 'POST',
        headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
        body: streamedUpload('image', 45 * MB),
        duplex: 'half',
      } as RequestInit & { duplex: 'half' });
      expect(res.status).toBe(200);
      return (await res.json()) as { files: Array<{ size: number }> };
    });
    expect(body.files[0]!.size).toBe(45 * MB);
    expect(held).toBeLessThan(20 * MB);
    expect(rss).toBeLessThan(30 * MB);
    await eventually(spoolIsEmpty);
  });

  it('answers 400 invalid_request_error naming the field for one file over the per-file limit, and discards the rest', async () => {
    const form = new FormData();
    form.append('model', 'whisper-1');
    form.append('file', new Blob([Buffer.alloc(150_000)], { type: 'audio/wav' }), 'a.wav');
    const res = await fetch(`${base}/small`, { method: 'POST', body: form });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { message: string; type: string; code: null } };
    expect(error).toEqual({ message: expect.stringContaining("'file'"), type: 'invalid_request_error', code: null });
    expect(seen).toBeNull();
    await eventually(spoolIsEmpty);

    // A client that sends its whole body before reading gets the 400, not a reset.
    const outcome = await socketUpload(`${base}/small`, { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, 900_000, { paceMs: 2, fill: 'a', preamble: FILE_PART_HEAD });
    expect(outcome.error).toBeNull();
    expect(outcome.sent).toBe(900_000);
    expect(outcome.answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(outcome.answer).toContain("'image'");
  });

  it('bounds fields: too many, or a single field repeated, is 400', async () => {
    const many = new FormData();
    for (let i = 0; i < 6; i += 1) many.append(`f${i}`, 'x');
    const res = await fetch(`${base}/small`, { method: 'POST', body: many });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/Too many fields/);

    const twice = new FormData();
    twice.append('model', 'a');
    twice.append('model', 'b');
    const again = await fetch(`${base}/small`, { method: 'POST', body: twice });
    expect(again.status).toBe(400);
    expect(((await again.json()) as { error: { message: string } }).error.message).toContain("'model'");
    await eventually(spoolIsEmpty);
  });

  it('removes the spool when the client goes away mid-upload', async () => {
    const outcome = await socketUpload(`${base}/v1/images/edits`, { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, 20 * MB, { paceMs: 1, fill: 'a', preamble: FILE_PART_HEAD, stopAfter: 5 * MB });
    expect(outcome.answer).toBe('');
    await eventually(spoolIsEmpty);
  });

  it('forwards the spooled body to each attempt with the same content, overrides applied, read from disk each time', async () => {
    const image = Buffer.alloc(600_000, 3);
    const mask = Buffer.from('the mask');
    const form = new FormData();
    form.append('model', 'my-route');
    form.append('prompt', 'make it blue');
    form.append('fallbacks', 'x');
    form.append('image', new Blob([image], { type: 'image/png' }), 'in.png');
    form.append('mask', new Blob([mask], { type: 'image/png' }), 'mask.png');
    const res = await fetch(`${base}/forward`, { method: 'POST', body: form });
    expect(res.status).toBe(200);
    const { attempts } = (await res.json()) as { attempts: Parsed[] };
    const files = [
      { field: 'image', filename: 'in.png', contentType: 'image/png', size: image.length, sha256: sha256(image) },
      { field: 'mask', filename: 'mask.png', contentType: 'image/png', size: mask.length, sha256: sha256(mask) },
    ];
    expect(attempts).toEqual([
      { fields: { model: ['dall-e-2'], prompt: ['make it blue'] }, files },
      { fields: { model: ['gpt-image-1'], prompt: ['make it blue'] }, files },
    ]);
    await eventually(spoolIsEmpty);
  });

  it('sends a forwarded body with a Content-Length (sizes known), so upstreams that refuse chunked bodies take it', async () => {
    const dir = path.join(dataDir, 'manual');
    await mkdir(dir, { recursive: true });
    const file = path.join(dir, 'part-0');
    await writeFile(file, Buffer.alloc(1234, 1));
    const body = await multipartForward({ fields: { model: 'whisper-1' }, files: [{ field: 'file', filename: 'a.wav', contentType: 'audio/wav', path: file, size: 1234 }] });
    const res = await request(echoUrl, { method: 'POST', body });
    expect(Number(res.headers['x-content-length'])).toBeGreaterThan(1234);
    const parsed = (await res.body.json()) as Parsed;
    expect(parsed.files[0]).toMatchObject({ field: 'file', size: 1234 });
    await rm(dir, { recursive: true });
  });

  it('sweeps spool directories older than an hour, and leaves recent ones', async () => {
    const old = path.join(spool, 'req_old');
    const recent = path.join(spool, 'req_recent');
    await mkdir(old, { recursive: true });
    await mkdir(recent, { recursive: true });
    const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
    await utimes(old, twoHoursAgo, twoHoursAgo);
    expect(await sweepSpool(spool)).toBe(1);
    expect(existsSync(old)).toBe(false);
    expect(existsSync(recent)).toBe(true);
    await rm(recent, { recursive: true });
  });
});
