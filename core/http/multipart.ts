import { createWriteStream, openAsBlob, type WriteStream } from 'node:fs';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import busboy from 'busboy';
import { FormData } from 'undici';
import { GatewayError } from '../errors';

/**
 * Multipart intake (spec 7 and 8): a multipart/form-data body is counted against the endpoint's
 * limit while it streams, parsed with busboy, and each file part written to a spool file on
 * disk, never held in memory. The spooled request can then be sent again, as a fresh body, to
 * each failover target (multipartForward) without reading the client's body twice.
 */

export type SpooledFile = { field: string; filename: string; contentType: string; path: string; size: number };

export type SpooledMultipart = {
  /** Text fields kept (the names asked for); a name ending in `[]` always holds a list. */
  fields: Record<string, string | string[]>;
  files: SpooledFile[];
  /** Names of parts that were not asked for: read and thrown away (spec 7 rule 6: not a 400). */
  ignored: string[];
};

export type MultipartLimits = {
  /** Whole body, counted as it streams: over it is 413 request_too_large. */
  maxBodyBytes: number;
  /** One file part: over it is 400 invalid_request_error naming the field. */
  maxFileBytes: number;
  /** File part names kept (spooled); other file parts are drained and discarded. */
  files: readonly string[];
  /** Text field names kept; other fields are read and discarded. */
  fields: readonly string[];
  /** At most this many text fields, kept or not (default 64). */
  maxFields?: number;
  /** One text field's value at most (default 256 KiB). */
  maxFieldBytes?: number;
  /** At most this many file parts, kept or not (default 16). */
  maxFiles?: number;
};

export const DEFAULT_MAX_FIELDS = 64;
export const DEFAULT_MAX_FIELD_BYTES = 256 * 1024;
export const DEFAULT_MAX_FILES = 16;

/** Where spool directories live under GW_DATA_DIR: one directory per request. */
export function spoolRoot(dataDir: string): string {
  return path.join(dataDir, 'spool');
}

/** The spool directory of one request (the id is reduced to safe characters). */
export function spoolDirFor(root: string, requestId: string): string {
  const safe = requestId.replace(/[^A-Za-z0-9_-]/g, '_') || 'request';
  return path.join(root, safe);
}

export function isMultipartContentType(contentType: string | undefined): boolean {
  return /^multipart\/form-data\s*(;|$)/i.test(contentType ?? '');
}

export function requestTooLarge(limit: number): GatewayError {
  return new GatewayError('request_too_large', `Request body is larger than this endpoint accepts (${limit} bytes).`);
}

function invalid(message: string, cause?: unknown): GatewayError {
  return new GatewayError('invalid_request', message, cause === undefined ? {} : { cause });
}

/**
 * Reads a multipart/form-data request into `dir`: text fields in memory (bounded in count and
 * size), file parts streamed to spool files with backpressure from the disk down to the socket.
 * Rejects with a GatewayError: 413 once more than `maxBodyBytes` arrived, 400 for a file over
 * `maxFileBytes` (naming its field), too many or too long fields, a repeated single field, a
 * malformed body or one the client abandoned. On rejection the request is left paused and
 * unread (the error handler's lingering close discards the rest) and every spool write has
 * settled; the caller removes `dir`.
 */
export async function spoolMultipart(req: IncomingMessage, dir: string, limits: MultipartLimits): Promise<SpooledMultipart> {
  const fileNames = new Set(limits.files);
  const fieldNames = new Set(limits.fields);
  const maxFields = limits.maxFields ?? DEFAULT_MAX_FIELDS;
  const maxFiles = limits.maxFiles ?? DEFAULT_MAX_FILES;
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: req.headers,
      limits: {
        fileSize: limits.maxFileBytes,
        files: maxFiles,
        fields: maxFields,
        fieldSize: limits.maxFieldBytes ?? DEFAULT_MAX_FIELD_BYTES,
        parts: maxFields + maxFiles,
        fieldNameSize: 200,
        headerPairs: 100,
      },
    });
  } catch (err) {
    throw invalid('The request body must be multipart/form-data with a boundary.', err);
  }
  await mkdir(dir, { recursive: true });

  const result: SpooledMultipart = { fields: {}, files: [], ignored: [] };
  // In the order the parts arrived; complete once every write has settled without a failure.
  const spooled: SpooledFile[] = [];
  const writes: Promise<void>[] = [];
  const open = new Set<Readable>();
  // Each spool file, settled once it is closed, whichever way its write ended.
  const sinks = new Set<WriteStream>();
  const closes: Promise<void>[] = [];
  let received = 0;
  let failure: Error | null = null;
  let settle!: (error: Error | null) => void;
  const done = new Promise<Error | null>((resolve) => (settle = resolve));

  const detach = () => {
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('aborted', onAborted);
    req.off('error', onAborted);
    req.off('close', onClose);
  };
  const fail = (err: Error) => {
    if (failure) return;
    failure = err;
    detach();
    // Nothing more is read here: the error handler lingers over what the client still sends.
    if (!req.readableEnded) req.pause();
    // Not from inside busboy's own callback (a 'limit' or 'field' event): it goes on using its state.
    // The spool files are destroyed too, and waited for by their own 'close': a part that
    // busboy had already ended (its file over the limit) does not always make the pipeline
    // settle when it is destroyed, and the request would then wait forever.
    setImmediate(() => {
      for (const stream of open) stream.destroy();
      for (const sink of sinks) sink.destroy();
      parser.destroy();
      void Promise.allSettled(closes).then(() => settle(err));
    });
  };

  const onData = (chunk: Buffer) => {
    received += chunk.length;
    if (received > limits.maxBodyBytes) return fail(requestTooLarge(limits.maxBodyBytes));
    if (!parser.write(chunk)) {
      req.pause();
      parser.once('drain', () => {
        if (!failure) req.resume();
      });
    }
  };
  const onEnd = () => parser.end();
  const onAborted = () => fail(invalid('Could not read the request body.'));
  const onClose = () => {
    if (!req.complete) onAborted();
  };

  parser.on('field', (name, value, info) => {
    if (failure) return;
    if (info.nameTruncated || info.valueTruncated) return fail(invalid(`The field '${name.slice(0, 200)}' is too long.`));
    if (!fieldNames.has(name)) return void result.ignored.push(name);
    if (name.endsWith('[]')) {
      const list = result.fields[name];
      result.fields[name] = Array.isArray(list) ? [...list, value] : [value];
    } else if (name in result.fields) {
      fail(invalid(`The field '${name}' is given more than once.`));
    } else {
      result.fields[name] = value;
    }
  });
  parser.on('file', (name, stream, info) => {
    if (failure || !fileNames.has(name)) {
      if (!failure) result.ignored.push(name);
      stream.resume();
      return;
    }
    const file: SpooledFile = {
      field: name,
      filename: info.filename ?? name,
      contentType: info.mimeType || 'application/octet-stream',
      // Named by position, never by the client's file name.
      path: path.join(dir, `part-${spooled.length}`),
      size: 0,
    };
    spooled.push(file);
    open.add(stream);
    stream.on('data', (chunk: Buffer) => (file.size += chunk.length));
    stream.once('limit', () =>
      fail(invalid(`The file in field '${name}' is larger than this endpoint accepts (${limits.maxFileBytes} bytes).`)),
    );
    const sink = createWriteStream(file.path, { flags: 'wx' });
    sinks.add(sink);
    closes.push(new Promise<void>((resolve) => sink.once('close', resolve)));
    writes.push(
      pipeline(stream, sink).then(
        () => void open.delete(stream),
        (err: unknown) => {
          open.delete(stream);
          fail(failure ?? invalid('Could not read the request body.', err));
        },
      ),
    );
  });
  parser.on('fieldsLimit', () => fail(invalid(`Too many fields: at most ${maxFields}.`)));
  parser.on('filesLimit', () => fail(invalid(`Too many files: at most ${maxFiles}.`)));
  parser.on('partsLimit', () => fail(invalid('Too many parts in the multipart body.')));
  parser.on('error', (err: Error) => fail(invalid('The multipart body is malformed.', err)));
  parser.on('close', () => {
    if (failure) return;
    void Promise.allSettled(writes).then(() => settle(failure));
  });

  req.on('data', onData);
  req.once('end', onEnd);
  req.once('aborted', onAborted);
  req.once('error', onAborted);
  req.once('close', onClose);
  req.resume();

  const error = await done;
  detach();
  if (error) throw error;
  result.files = spooled;
  return result;
}

/** Removes a spool directory and what is in it; never throws. */
export async function removeSpool(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true }).catch(() => undefined);
}

/**
 * Removes spool directories a crashed process left behind: those not modified for `maxAgeMs`
 * (an hour by default; several API processes may share GW_DATA_DIR, and a request's spool
 * lives only as long as the request). Answers how many were removed.
 */
export async function sweepSpool(root: string, options: { maxAgeMs?: number; now?: number } = {}): Promise<number> {
  const maxAgeMs = options.maxAgeMs ?? 3_600_000;
  const now = options.now ?? Date.now();
  const entries = await readdir(root, { withFileTypes: true }).catch(() => []);
  let removed = 0;
  for (const entry of entries) {
    const full = path.join(root, entry.name);
    const info = await stat(full).catch(() => null);
    if (!info || now - info.mtimeMs <= maxAgeMs) continue;
    await removeSpool(full);
    removed += 1;
  }
  return removed;
}

/** A field's new value, or null/undefined to leave it out. */
export type FieldOverrides = Record<string, string | readonly string[] | null | undefined>;

/**
 * A fresh multipart/form-data body for one upstream attempt: the spooled fields, with
 * `overrides` replacing (or, with null, removing) fields by name, then the spooled files as
 * Blobs backed by their files on disk, so each attempt streams the same bytes from disk and
 * nothing is held in memory. Call it once per attempt: a body is consumed by sending it. undici
 * (`request` or `fetch`) sets the boundary and, the sizes being known, the Content-Length.
 */
export async function multipartForward(
  spooled: Pick<SpooledMultipart, 'fields' | 'files'>,
  overrides: FieldOverrides = {},
): Promise<FormData> {
  const form = new FormData();
  const fields: Record<string, string | readonly string[] | null | undefined> = { ...spooled.fields };
  for (const [name, value] of Object.entries(overrides)) fields[name] = value;
  for (const [name, value] of Object.entries(fields)) {
    if (value === null || value === undefined) continue;
    for (const item of typeof value === 'string' ? [value] : value) form.append(name, item);
  }
  for (const file of spooled.files) {
    const blob = await openAsBlob(file.path, { type: file.contentType });
    form.append(file.field, blob, file.filename);
  }
  return form;
}
