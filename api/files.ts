import Router from '@koa/router';
import { eq } from 'drizzle-orm';
import type { Clock } from '../core/clock';
import type { Database } from '../core/db/client';
import { jobs } from '../core/db/schema';
import { GatewayError } from '../core/errors';
import type { LinkSigner } from '../core/jobs/output-links';
import { OUTPUT_LINK_PATH } from '../core/jobs/output-links';
import type { OutputStorage } from '../core/storage/output-storage';
import type { GatewayState } from './context';

/**
 * Signed output links (spec 4.2 rule 4): the signature is the credential. A wrong signature, a
 * passed `exp`, or an output past its retention all answer 404 alike. `download=1` adds
 * `Content-Disposition: attachment` named after the job.
 */
export function filesRouter(deps: { db: Database; clock: Clock; signer: LinkSigner; storage: OutputStorage }): Router<GatewayState> {
  const router = new Router<GatewayState>({ prefix: OUTPUT_LINK_PATH });
  const gone = () => new GatewayError('not_found', 'No such file, or its link has expired.');

  router.get('/:id', async (ctx) => {
    const id = ctx.params.id!;
    const now = deps.clock.now();
    if (!deps.signer.verify(id, ctx.query.exp as string | undefined, ctx.query.sig as string | undefined, now)) throw gone();
    const [job] = await deps.db.select().from(jobs).where(eq(jobs.id, id));
    if (!job?.output || !job.expiresAt || job.expiresAt.getTime() <= now.getTime()) throw gone();
    const file = await deps.storage.open(job.output.storage_key);
    if (!file) throw gone();
    ctx.type = job.output.mime_type;
    ctx.length = file.bytes;
    ctx.set('Cache-Control', 'private, no-store');
    if (ctx.query.download === '1') ctx.set('Content-Disposition', `attachment; filename="${job.id}.mp4"`);
    ctx.body = file.stream;
  });
  return router;
}
