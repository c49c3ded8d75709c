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
 * The media types a link serves as themselves (issue 20): the type is the provider's word, and
 * these files come from our origin, so only types a browser shows as media are kept; anything
 * else (HTML, SVG, JavaScript, XML) is served as `application/octet-stream`. Video types only on
 * job outputs.
 */
const IMAGE_TYPES = /^image\/(png|jpeg|webp|gif|avif)$/;
const AUDIO_TYPES = /^audio\/[a-z0-9][a-z0-9.+-]*$/;
const VIDEO_TYPES = /^video\/(mp4|webm|quicktime)$/;
const OPAQUE_TYPE = 'application/octet-stream';

export function servedType(mimeType: string, allowVideo: boolean): string {
  const type = mimeType.split(';')[0]!.trim().toLowerCase();
  return IMAGE_TYPES.test(type) || AUDIO_TYPES.test(type) || (allowVideo && VIDEO_TYPES.test(type)) ? type : OPAQUE_TYPE;
}

/**
 * Signed output links (spec 4.2 rule 4): the signature is the credential. A wrong signature, a
 * passed `exp`, an unknown id, a file past its retention, or one already deleted all answer 404
 * alike. `download=1` adds `Content-Disposition: attachment`, named after the job or request.
 * Two kinds share the rules: video job outputs (`/files/jobs`) and media outputs (`/files/media`).
 * Every file is served as inert content: an allowed media type (`servedType`), `nosniff`, and a
 * sandboxing Content-Security-Policy, so nothing a provider handed back runs on our origin.
 */
export function filesRouter(deps: { db: Database; clock: Clock; signer: LinkSigner; storage: OutputStorage }): Router<GatewayState> {
  const router = new Router<GatewayState>();
  const gone = () => new GatewayError('not_found', 'No such file, or its link has expired.');

  const serve = (path: string, allowVideo: boolean, find: (id: string) => Promise<LinkedFile | null>) =>
    router.get(`${path}/:id`, async (ctx) => {
      const id = ctx.params.id!;
      const now = deps.clock.now();
      if (!deps.signer.verify(id, ctx.query.exp as string | undefined, ctx.query.sig as string | undefined, now, path)) throw gone();
      const linked = await find(id);
      if (!linked?.expiresAt || linked.expiresAt.getTime() <= now.getTime()) throw gone();
      const file = await deps.storage.open(linked.storageKey);
      if (!file) throw gone();
      ctx.type = servedType(linked.mimeType, allowVideo);
      ctx.length = file.bytes;
      ctx.set('Cache-Control', 'private, no-store');
      ctx.set('X-Content-Type-Options', 'nosniff');
      ctx.set('Content-Security-Policy', 'sandbox');
      if (ctx.query.download === '1') ctx.set('Content-Disposition', `attachment; filename="${linked.filename}"`);
      ctx.body = file.stream;
    });

  serve(OUTPUT_LINK_PATH, true, async (id) => {
    const [job] = await deps.db.select().from(jobs).where(eq(jobs.id, id));
    return job?.output ? { storageKey: job.output.storage_key, mimeType: job.output.mime_type, filename: `${job.id}.mp4`, expiresAt: job.expiresAt } : null;
  });
  serve(MEDIA_LINK_PATH, false, async (id) => {
    const [file] = await deps.db.select().from(mediaFiles).where(eq(mediaFiles.id, id));
    return file ?? null;
  });
  return router;
}
