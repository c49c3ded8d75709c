import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/**
 * Where finished outputs are kept for their 24 hours. The local directory serves one machine
 * (API and workers sharing a disk); a deployment spread over machines implements this small
 * interface over an object store.
 */
export interface OutputStorage {
  put(key: string, body: AsyncIterable<Uint8Array> | Readable): Promise<{ bytes: number }>;
  /** The stored file and its size, or null when it is gone; `start` reads from that byte on. */
  open(key: string, options?: { start?: number }): Promise<{ stream: Readable; bytes: number } | null>;
  remove(key: string): Promise<void>;
}

/** Keys are our own ids joined by `/`; anything else is refused rather than resolved. */
function safePath(root: string, key: string): string {
  if (!/^[A-Za-z0-9_./-]+$/.test(key) || key.split('/').some((p) => p === '..' || p === '')) throw new Error(`bad storage key ${key}`);
  return path.join(root, key);
}

export function localOutputStorage(root: string): OutputStorage {
  return {
    async put(key, body) {
      const file = safePath(root, key);
      await fs.promises.mkdir(path.dirname(file), { recursive: true });
      // Written aside, then renamed: a reader never sees half a file.
      const partial = `${file}.partial`;
      try {
        await pipeline(body instanceof Readable ? body : Readable.from(body), fs.createWriteStream(partial));
      } catch (err) {
        // A body that failed half-way (a refused upload) leaves nothing behind.
        await fs.promises.rm(partial, { force: true });
        throw err;
      }
      await fs.promises.rename(partial, file);
      return { bytes: (await fs.promises.stat(file)).size };
    },
    async open(key, options) {
      const file = safePath(root, key);
      try {
        const stat = await fs.promises.stat(file);
        return { stream: fs.createReadStream(file, { start: options?.start ?? 0 }), bytes: stat.size };
      } catch {
        return null;
      }
    },
    async remove(key) {
      await fs.promises.rm(safePath(root, key), { force: true });
    },
  };
}
