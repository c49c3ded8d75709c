import { unixOrNull } from '../clock';
import type { jobs } from '../db/schema';
import type { LinkSigner } from './output-links';

type JobRow = typeof jobs.$inferSelect;


/** The job object of spec 2.1, exactly as a read returns it (and as events carry it). */
export function presentJob(row: JobRow, links: { signer: LinkSigner; baseUrl: string }): Record<string, unknown> {
  const output = row.status === 'succeeded' && row.output && row.expiresAt
    ? {
        url: links.signer.url(links.baseUrl, row.id, row.expiresAt),
        duration_seconds: row.output.duration_seconds,
        resolution: row.output.resolution,
        aspect_ratio: row.output.aspect_ratio,
        mime_type: row.output.mime_type,
      }
    : null;
  return {
    id: row.id,
    object: 'job',
    type: row.type,
    status: row.status,
    model: row.model,
    route: row.route,
    provider: row.provider,
    connection: row.connectionId,
    progress: row.progress,
    created_at: unixOrNull(row.createdAt),
    started_at: unixOrNull(row.startedAt),
    completed_at: unixOrNull(row.completedAt),
    expires_at: unixOrNull(row.expiresAt),
    output,
    usage: row.status === 'succeeded' ? row.usage : null,
    error: row.status === 'failed' ? row.error : null,
  };
}
