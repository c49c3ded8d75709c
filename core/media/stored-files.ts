import { Readable } from 'node:stream';
import type { Clock } from '../clock';
import type { Database } from '../db/client';
import { mediaFiles } from '../db/schema';
import { newId } from '../ids';
import type { LinkSigner } from '../jobs/output-links';
import type { OutputStorage } from '../storage/output-storage';

/** Where the outputs of the synchronous media endpoints are served (api/files.ts). */
export const MEDIA_LINK_PATH = '/files/media';

export type KeptFile = { id: string; url: string; expiresAt: Date; mimeType: string; bytes: number };

export type MediaFiles = {
  /**
   * Stores one output (an image, a speech file) and answers its signed link, valid for the
   * retention. `filename` is what `download=1` names it: the request id and an extension.
   */
  keep(input: { orgId: string; requestId: string; filename: string; mimeType: string; body: Buffer | Readable; baseUrl: string }): Promise<KeptFile>;
};

/**
 * The name goes into a quoted `Content-Disposition` header unescaped, so only plain names are
 * accepted; callers build it from ids, never from client input.
 */
const SAFE_FILENAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

export function createMediaFiles(deps: { db: Database; storage: OutputStorage; signer: LinkSigner; clock: Clock; retentionMs: number }): MediaFiles {
  return {
    async keep(input) {
      if (!SAFE_FILENAME.test(input.filename)) throw new Error(`unsafe download name ${JSON.stringify(input.filename)}`);
      const now = deps.clock.now();
      const id = newId('file', now.getTime());
      const expiresAt = new Date(now.getTime() + deps.retentionMs);
      const storageKey = `media/${input.orgId}/${id}`;
      const body = Buffer.isBuffer(input.body) ? Readable.from([input.body]) : input.body;
      const { bytes } = await deps.storage.put(storageKey, body);
      try {
        await deps.db.insert(mediaFiles).values({ id, orgId: input.orgId, requestId: input.requestId, storageKey, mimeType: input.mimeType, bytes, filename: input.filename, expiresAt, createdAt: now });
      } catch (err) {
        // Without its row nothing would ever link to the object, nor delete it.
        await deps.storage.remove(storageKey).catch(() => undefined);
        throw err;
      }
      return { id, url: deps.signer.url(input.baseUrl, id, expiresAt, MEDIA_LINK_PATH), expiresAt, mimeType: input.mimeType, bytes };
    },
  };
}
