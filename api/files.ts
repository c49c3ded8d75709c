import Router from '@koa/router';
import { eq } from 'drizzle-orm';
import type { Clock } from '../core/clock';
import type { Database } from '../core/db/client';
import { jobs, mediaFiles } from '../core/db/schema';
import { GatewayError } from '../core/errors';
import type { LinkSigner } from '../core/jobs/output-links';
import { OUTPUT_LINK_PATH } from '../core/jobs/output-links';
import { MEDIA_LINK_PATH } from '../core/media/stored-files';
import type { OutputStorage } from '../core/storage/output-storage';
import type { GatewayState } from './context';

/** What a signed link resolves to: the stored object, how to serve it, and until when. */
type LinkedFile = { storageKey: string; mimeType: string; filename: string; expiresAt: Date | null };

/**
 * Signed output links (spec 4.2 rule 4): the signature is the credential. A wrong signature, a
 * passed `exp`, an unknown id, a file past its retention, or one already deleted all answer 404
 * alike. `download=1` adds `Content-Disposition: attachment`, named after the job or request.
 * Two kinds share the rules: video job outputs (`/files/jobs`) and media outputs (`/files/media`).
 */
export function filesRouter(deps: { db: Database; clock: Clock; signer: LinkSigner; storage: OutputStorage }): Router<GatewayState> {
  const router = new Router<GatewayState>();
  const gone = () => new GatewayError('not_found', 'No such file, or its link has expired.');

  const serve = (path: string, find: (id: string) => Promise<LinkedFile | null>) =>
    router.get(`${path}/:id`, async (ctx) => {
      const id = ctx.params.id!;
      const now = deps.clock.now();
      if (!deps.signer.verify(id, ctx.query.exp as string | undefined, ctx.query.sig as string | undefined, now, path)) throw gone();
      const linked = await find(id);
      if (!linked?.expiresAt || linked.expiresAt.getTime() <= now.getTime()) throw gone();
      const file = await deps.storage.open(linked.storageKey);
      if (!file) throw gone();
      ctx.type = linked.mimeType;
      ctx.length = file.bytes;
      ctx.set('Cache-Control', 'private, no-store');
      if (ctx.query.download === '1') ctx.set('Content-Disposition', `attachment; filename="${linked.filename}"`);
      ctx.body = file.stream;
    });

  serve(OUTPUT_LINK_PATH, async (id) => {
    const [job] = await deps.db.select().from(jobs).where(eq(jobs.id, id));
    return job?.output ? { storageKey: job.output.storage_key, mimeType: job.output.mime_type, filename: `${job.id}.mp4`, expiresAt: job.expiresAt } : null;
  });
  serve(MEDIA_LINK_PATH, async (id) => {
    const [file] = await deps.db.select().from(mediaFiles).where(eq(mediaFiles.id, id));
    return file ?? null;
  });
  return router;
}
