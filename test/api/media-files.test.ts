import { Readable } from 'node:stream';
import { eq } from 'drizzle-orm';
import { fixedClock, systemClock } from '../../core/clock';
import { jobs, mediaFiles } from '../../core/db/schema';
import { newId } from '../../core/ids';
import { OUTPUT_LINK_PATH } from '../../core/jobs/output-links';
import { OUTPUT_RETENTION_MS } from '../../core/jobs/schedule';
import { createMediaFiles, MEDIA_LINK_PATH, type MediaFiles } from '../../core/media/stored-files';
import { startManagementFixture, type ManagementFixture } from '../helpers/manage-client';

const HOUR = 3_600_000;
/** A few bytes that say PNG; the route serves whatever was stored. */
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.from('not really an image, but bytes all the same')]);

/**
 * Issue 14: image and speech outputs are stored and served by signed links (spec 4.2 rule 4),
 * `/files/media/<file id>?exp=..&sig=..`, with the same rules as job outputs.
 */
describe('media file links', () => {
  let f: ManagementFixture;
  let made: (clock?: ReturnType<typeof fixedClock>, retentionMs?: number) => MediaFiles;

  beforeAll(async () => {
    f = await startManagementFixture();
    const gateway = f.api.runtime.deps.gateway;
    made = (clock, retentionMs = HOUR) => createMediaFiles({ db: f.database.db, storage: gateway.storage, signer: gateway.jobs.links.signer, clock: clock ?? systemClock, retentionMs });
  });
  afterAll(() => f.close());

  const keep = (files: MediaFiles, extra: Partial<Parameters<MediaFiles['keep']>[0]> = {}) => {
    const requestId = newId('req');
    return files.keep({ orgId: f.tenant.orgId, requestId, filename: `${requestId}.png`, mimeType: 'image/png', body: PNG, baseUrl: f.api.url, ...extra });
  };
  const expectGone = async (url: string) => {
    const res = await fetch(url);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: { message: expect.any(String), type: 'not_found', code: null } });
  };

  it('serves the stored bytes with their type through the runtime\'s MediaFiles; download=1 names the file', async () => {
    const before = Date.now();
    const requestId = newId('req');
    const kept = await f.api.runtime.deps.gateway.mediaFiles.keep({ orgId: f.tenant.orgId, requestId, filename: `${requestId}.png`, mimeType: 'image/png', body: PNG, baseUrl: f.api.url });
    expect(kept).toMatchObject({ id: expect.stringMatching(/^file_/), mimeType: 'image/png', bytes: PNG.length });
    expect(kept.url).toMatch(new RegExp(`^${f.api.url}${MEDIA_LINK_PATH}/${kept.id}\\?exp=\\d+&sig=[0-9a-f]{64}$`));
    // Valid as long as a job's output, scaled like every durable wait.
    const retention = Math.round(OUTPUT_RETENTION_MS * f.api.config.GW_SCHEDULE_SCALE);
    expect(kept.expiresAt.getTime()).toBeGreaterThanOrEqual(before + retention);
    expect(kept.expiresAt.getTime()).toBeLessThanOrEqual(Date.now() + retention);

    const res = await fetch(kept.url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('cache-control')).toBe('private, no-store');
    expect(res.headers.get('content-disposition')).toBeNull();
    expect(Buffer.from(await res.arrayBuffer())).toEqual(PNG);

    const download = await fetch(`${kept.url}&download=1`);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-disposition')).toBe(`attachment; filename="${requestId}.png"`);
    expect(Buffer.from(await download.arrayBuffer())).toEqual(PNG);

    const [row] = await f.database.db.select().from(mediaFiles).where(eq(mediaFiles.id, kept.id));
    expect(row).toMatchObject({ orgId: f.tenant.orgId, requestId, storageKey: `media/${f.tenant.orgId}/${kept.id}`, mimeType: 'image/png', bytes: PNG.length, filename: `${requestId}.png`, expiresAt: kept.expiresAt });
  });

  it('keeps a streamed body (speech audio) and serves it with its own type', async () => {
    const audio = Buffer.alloc(64 * 1024, 7);
    const kept = await keep(made(), { mimeType: 'audio/mpeg', filename: 'req_speech.mp3', body: Readable.from([audio.subarray(0, 1000), audio.subarray(1000)]) });
    expect(kept.bytes).toBe(audio.length);
    const res = await fetch(`${kept.url}&download=1`);
    expect([res.status, res.headers.get('content-type'), res.headers.get('content-disposition')]).toEqual([200, 'audio/mpeg', 'attachment; filename="req_speech.mp3"']);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(audio);
  });

  it('serves only media types as themselves, every file inert: nosniff and a sandboxing CSP (issue 20)', async () => {
    const files = made();
    const served = async (mimeType: string) => {
      const kept = await keep(files, { mimeType });
      const res = await fetch(kept.url);
      await res.arrayBuffer();
      return [res.status, res.headers.get('content-type'), res.headers.get('x-content-type-options'), res.headers.get('content-security-policy')];
    };
    expect(await served('image/png')).toEqual([200, 'image/png', 'nosniff', 'sandbox']);
    expect(await served('audio/mpeg')).toEqual([200, 'audio/mpeg', 'nosniff', 'sandbox']);
    expect(await served('Image/WEBP; charset=binary')).toEqual([200, 'image/webp', 'nosniff', 'sandbox']);
    for (const provided of ['text/html', 'text/html; charset=utf-8', 'image/svg+xml', 'application/javascript', 'application/xhtml+xml', 'text/xml', 'video/mp4', 'multipart/x-mixed-replace']) {
      expect(await served(provided)).toEqual([200, 'application/octet-stream', 'nosniff', 'sandbox']);
    }

    // Job outputs (the same route) also keep video types, and nothing else beyond media.
    const signer = f.api.runtime.deps.gateway.jobs.links.signer;
    const storage = f.api.runtime.deps.gateway.storage;
    const job = async (mimeType: string) => {
      const id = newId('job');
      const expiresAt = new Date(Date.now() + HOUR);
      await storage.put(`jobs/${id}/output.mp4`, Readable.from([PNG]));
      await f.database.db.insert(jobs).values({
        id, orgId: f.tenant.orgId, keyId: 'key_x', lineageId: 'lin_x', projectId: f.tenant.projectId, type: 'video.generation', status: 'succeeded', model: 'openai/sora-2', request: {},
        output: { storage_key: `jobs/${id}/output.mp4`, duration_seconds: 4, resolution: '1280x720', aspect_ratio: '16:9', mime_type: mimeType, bytes: PNG.length }, expiresAt,
      });
      const res = await fetch(signer.url(f.api.url, id, expiresAt));
      await res.arrayBuffer();
      return [res.status, res.headers.get('content-type'), res.headers.get('x-content-type-options'), res.headers.get('content-security-policy')];
    };
    expect(await job('video/mp4')).toEqual([200, 'video/mp4', 'nosniff', 'sandbox']);
    expect(await job('text/html')).toEqual([200, 'application/octet-stream', 'nosniff', 'sandbox']);
  });

  it('answers 404 not_found to a tampered, missing or misplaced signature, and to an unknown id', async () => {
    const kept = await keep(made());
    await expectGone(kept.url.replace(/sig=([0-9a-f])/, (_: string, c: string) => `sig=${c === '0' ? '1' : '0'}`));
    await expectGone(kept.url.replace(/&sig=[0-9a-f]+/, ''));
    await expectGone(kept.url.replace(/exp=(\d+)/, (_: string, exp: string) => `exp=${Number(exp) + 60}`));
    // A media signature does not open the jobs path under the same id, nor the other way round.
    await expectGone(kept.url.replace(MEDIA_LINK_PATH, OUTPUT_LINK_PATH));
    const signer = f.api.runtime.deps.gateway.jobs.links.signer;
    await expectGone(signer.url(f.api.url, kept.id, kept.expiresAt).replace(OUTPUT_LINK_PATH, MEDIA_LINK_PATH));
    // Correctly signed, but no such file.
    await expectGone(signer.url(f.api.url, newId('file'), new Date(Date.now() + HOUR), MEDIA_LINK_PATH));
    // The real link still works.
    expect((await fetch(kept.url)).status).toBe(200);
  });

  it('answers 404 once the link has expired', async () => {
    // Kept two hours ago for one hour: the link's exp has passed.
    const kept = await keep(made(fixedClock(new Date(Date.now() - 2 * HOUR))));
    expect(kept.expiresAt.getTime()).toBeLessThan(Date.now());
    await expectGone(kept.url);
    await expectGone(`${kept.url}&download=1`);
  });

  it('answers 404 for a file past its expires_at even while the signature still holds, and for a stored file gone', async () => {
    const kept = await keep(made());
    expect((await fetch(kept.url)).status).toBe(200);
    await f.database.db.update(mediaFiles).set({ expiresAt: new Date(Date.now() - 1000) }).where(eq(mediaFiles.id, kept.id));
    await expectGone(kept.url);

    const other = await keep(made());
    const [row] = await f.database.db.select().from(mediaFiles).where(eq(mediaFiles.id, other.id));
    await f.api.runtime.deps.gateway.storage.remove(row!.storageKey);
    await expectGone(other.url);
  });

  it('refuses a download name that could break the header, storing nothing', async () => {
    const requestId = newId('req');
    await expect(keep(made(), { requestId, filename: 'a"b.png' })).rejects.toThrow(/unsafe download name/);
    expect(await f.database.db.select().from(mediaFiles).where(eq(mediaFiles.requestId, requestId))).toEqual([]);
  });
});
