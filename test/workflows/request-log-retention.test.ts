import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Readable } from 'node:stream';
import { Client, ScheduleOverlapPolicy } from '@temporalio/client';
import { inArray, sql } from 'drizzle-orm';
import { fixedClock, systemClock } from '../../core/clock';
import { batches, files, mediaFiles, organizations, orgSettings, requestLogs, storedResponses } from '../../core/db/schema';
import { createLinkSigner } from '../../core/jobs/output-links';
import { deleteExpiredMediaFiles } from '../../core/media/expired-files';
import { createMediaFiles } from '../../core/media/stored-files';
import { findConversationHead, findStoredResponse, loadConversation, storedResponseReader } from '../../core/responses/stored-responses';
import { localOutputStorage, type OutputStorage } from '../../core/storage/output-storage';
import { partitionDropCutoff, partitionName, REQUEST_LOG_PARTITIONS_AHEAD_DAYS } from '../../core/request-log/retention';
import { REQUEST_LOG_RETENTION_EVERY_MS, scheduleIds, taskQueue, type RequestLogRetentionResult } from '../../workflows/definitions';
import { ensureMaintenanceSchedules } from '../../workers/schedules';
import { startTestWorkers, testDatabase, uniquePrefix } from '../helpers/harness';
import { saveHistory } from '../helpers/histories';
import { testTemporalClient } from '../helpers/sealing-keys';

const DAY_MS = 86_400_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The request log's retention (issue 13 section 4): the `requestLogRetention` workflow on the
 * maintenance queue clears expired bodies per organization and keeps the metadata, makes day
 * partitions ahead and drops those past the longest history window; the maintenance worker
 * makes its Temporal Schedule as it starts.
 */
describe('request log retention', () => {
  const prefix = uniquePrefix('retention');
  const database = testDatabase();
  let workers: Awaited<ReturnType<typeof startTestWorkers>>;
  let temporal: Client;
  const run = Date.now().toString(36);
  const orgDefault = `org_ret30_${run}`;
  const orgWeek = `org_ret7_${run}`;

  beforeAll(async () => {
    workers = await startTestWorkers(['maintenance'], prefix);
    temporal = testTemporalClient(workers.connection);
    await database.db.insert(organizations).values([{ id: orgDefault, name: 'thirty days' }, { id: orgWeek, name: 'seven days' }]);
    // orgDefault has no settings row: the column's default of 30 days applies.
    await database.db.insert(orgSettings).values({ id: orgWeek, orgId: orgWeek, promptLoggingEnabled: true, promptLoggingRetentionDays: 7 });
  });
  afterAll(async () => {
    await workers.shutdown();
    await database.close();
  });

  const daysAgo = (days: number) => new Date(Date.now() - days * DAY_MS);
  const logRow = (orgId: string, id: string, createdAt: Date) => ({
    id, orgId, keyId: 'key_ret', projectId: 'proj_ret', endpoint: 'chat.completions', requestedModel: 'gpt-4o-mini', provider: 'openai',
    status: 200, latencyMs: 12, usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 }, cost: 0.000002, userId: 'u1', sessionId: 's1',
    tags: { team: 'a' }, requestBody: { messages: [{ role: 'user', content: 'secret prompt' }] }, responseBody: { choices: [{ message: { content: 'answer' } }] }, createdAt,
  });
  const partitions = async () =>
    (await database.db.execute<{ name: string }>(sql`select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = 'request_logs'::regclass`)).rows.map((r) => r.name);
  const runRetention = (id: string) =>
    temporal.workflow.execute('requestLogRetention', { taskQueue: taskQueue('maintenance', prefix), workflowId: `${prefix}${id}`, args: [] }) as Promise<RequestLogRetentionResult>;

  it('clears bodies past each organization\'s retention, keeps their metadata and keeps newer bodies', async () => {
    const ids = { old30: `req_${run}_a`, new30: `req_${run}_b`, old7: `req_${run}_c`, new7: `req_${run}_d` };
    await database.db.insert(requestLogs).values([
      logRow(orgDefault, ids.old30, daysAgo(31)),
      logRow(orgDefault, ids.new30, daysAgo(10)),
      logRow(orgWeek, ids.old7, daysAgo(8)),
      logRow(orgWeek, ids.new7, daysAgo(3)),
    ]);

    const result = await runRetention('bodies');
    expect(result.finished).toBe(true);
    expect(result.bodiesCleared).toBeGreaterThanOrEqual(2);

    const rows = new Map((await database.db.select().from(requestLogs).where(inArray(requestLogs.id, Object.values(ids)))).map((r) => [r.id, r]));
    for (const id of [ids.old30, ids.old7]) {
      const row = rows.get(id)!;
      expect([row.requestBody, row.responseBody]).toEqual([null, null]);
      // Compressed retention: everything but the bodies stays.
      expect(row).toMatchObject({ status: 200, requestedModel: 'gpt-4o-mini', provider: 'openai', userId: 'u1', sessionId: 's1', tags: { team: 'a' }, cost: 0.000002, usage: { total_tokens: 8 } });
    }
    for (const id of [ids.new30, ids.new7]) {
      expect(rows.get(id)!.requestBody).toEqual({ messages: [{ role: 'user', content: 'secret prompt' }] });
      expect(rows.get(id)!.responseBody).toEqual({ choices: [{ message: { content: 'answer' } }] });
    }
    // A second run finds nothing more to do.
    expect((await runRetention('bodies-again')).bodiesCleared).toBe(0);
  });

  it('deletes kept Responses past their organization\'s prompt retention, turn by turn, keeping newer ones', async () => {
    // One row a turn: each newer turn here continues the older one of its organization.
    const kept = (orgId: string, id: string, createdAt: Date, previousId: string | null = null) => ({
      id, orgId, keyId: 'key_ret', lineageId: 'lin_ret', previousId, depth: previousId ? 2 : 1, conversationBytes: 100,
      input: [{ role: 'user', content: 'secret prompt' }], response: { id, object: 'response', output: [] }, createdAt,
    });
    const ids = { old30: `resp_${run}_a`, new30: `resp_${run}_b`, old7: `resp_${run}_c`, new7: `resp_${run}_d` };
    await database.db.insert(storedResponses).values([
      kept(orgDefault, ids.old30, daysAgo(31)), kept(orgDefault, ids.new30, daysAgo(10), ids.old30),
      kept(orgWeek, ids.old7, daysAgo(8)), kept(orgWeek, ids.new7, daysAgo(3), ids.old7),
    ]);
    await runRetention('stored-responses');
    const left = (await database.db.select({ id: storedResponses.id }).from(storedResponses).where(inArray(storedResponses.id, Object.values(ids)))).map((r) => r.id).sort();
    expect(left).toEqual([ids.new30, ids.new7].sort());
    // The later turn still reads, but its conversation lost its first turn: it no longer continues.
    const reader = storedResponseReader({ orgId: orgDefault, keyId: 'key_ret', lineageId: 'lin_ret', observabilityAccess: 'scoped' }, 'business', new Date());
    expect(await findStoredResponse(database.db, reader, ids.new30)).toMatchObject({ id: ids.new30 });
    const head = await findConversationHead(database.db, reader, ids.new30);
    expect(head).toMatchObject({ id: ids.new30, depth: 2 });
    expect(await loadConversation(database.db, reader, head!)).toBeNull();
  });

  it('makes day partitions ahead (moving rows the default partition caught) and drops days past the longest history window', async () => {
    const now = new Date();
    const lastAhead = new Date(Math.floor(now.getTime() / DAY_MS) * DAY_MS + REQUEST_LOG_PARTITIONS_AHEAD_DAYS * DAY_MS);
    const aheadName = partitionName(lastAhead);
    // The furthest day ahead goes missing, and a row for it lands in the default partition.
    await database.db.execute(sql`drop table if exists ${sql.identifier(aheadName)}`);
    const early = `req_${run}_ahead`;
    await database.db.insert(requestLogs).values(logRow(orgDefault, early, new Date(lastAhead.getTime() + 3_600_000)));
    expect((await database.db.execute<{ n: number }>(sql`select count(*)::int as n from request_logs_default where id = ${early}`)).rows[0]!.n).toBe(1);

    // A day wholly past the window (plus slack), with a row in it; and an old row in the default.
    const oldDay = new Date(Math.floor(partitionDropCutoff(now).getTime() / DAY_MS) * DAY_MS - 3 * DAY_MS);
    const oldName = partitionName(oldDay);
    await database.db.execute(sql.raw(`create table if not exists "${oldName}" partition of request_logs for values from ('${oldDay.toISOString()}') to ('${new Date(oldDay.getTime() + DAY_MS).toISOString()}')`));
    await database.db.insert(requestLogs).values(logRow(orgDefault, `req_${run}_old`, new Date(oldDay.getTime() + 60_000)));
    await database.db.insert(requestLogs).values(logRow(orgDefault, `req_${run}_olddefault`, new Date(oldDay.getTime() - 5 * DAY_MS)));
    // The day just inside the window stays.
    const keptDay = new Date(Math.floor(partitionDropCutoff(now).getTime() / DAY_MS) * DAY_MS);
    const keptName = partitionName(keptDay);
    await database.db.execute(sql.raw(`create table if not exists "${keptName}" partition of request_logs for values from ('${keptDay.toISOString()}') to ('${new Date(keptDay.getTime() + DAY_MS).toISOString()}')`));

    const result = await runRetention('partitions');
    expect(result.partitionsCreated).toContain(aheadName);
    expect(result.partitionsDropped).toContain(oldName);
    const names = await partitions();
    for (let i = 0; i <= REQUEST_LOG_PARTITIONS_AHEAD_DAYS; i++) expect(names).toContain(partitionName(new Date(Math.floor(now.getTime() / DAY_MS) * DAY_MS + i * DAY_MS)));
    expect(names).not.toContain(oldName);
    expect(names).toContain(keptName);
    expect(names).toContain('request_logs_default');

    const where = async (id: string) => (await database.db.execute<{ t: string }>(sql`select tableoid::regclass::text as t from request_logs where id = ${id}`)).rows.map((r) => r.t);
    expect(await where(early)).toEqual([aheadName]);
    expect(await where(`req_${run}_old`)).toEqual([]);
    expect(await where(`req_${run}_olddefault`)).toEqual([]);

    // Idempotent: nothing left to make or drop.
    const again = await runRetention('partitions-again');
    expect([again.partitionsCreated, again.partitionsDropped]).toEqual([[], []]);
  });

  describe('media files', () => {
    const HOUR = 3_600_000;
    // The directory the test workers' storage uses (GW_DATA_DIR/outputs).
    const storage = localOutputStorage(path.join(process.env.GW_DATA_DIR!, 'outputs'));
    const signer = createLinkSigner(randomBytes(32));
    const keepAt = (at: Date | null) =>
      createMediaFiles({ db: database.db, storage, signer, clock: at ? fixedClock(at) : systemClock, retentionMs: HOUR })
        .keep({ orgId: orgDefault, requestId: `req_${run}_media`, filename: `req_${run}_media.png`, mimeType: 'image/png', body: Buffer.from('png bytes'), baseUrl: 'http://localhost' });
    const rowsOf = async (ids: string[]) => (await database.db.select().from(mediaFiles).where(inArray(mediaFiles.id, ids))).map((r) => r.id).sort();
    const storedKey = (id: string) => `media/${orgDefault}/${id}`;

    it('the retention run deletes files past expires_at, object and row, and keeps the rest', async () => {
      const expired = [await keepAt(new Date(Date.now() - 2 * HOUR)), await keepAt(new Date(Date.now() - 3 * HOUR))];
      const current = await keepAt(null);
      for (const file of [...expired, current]) expect(await storage.open(storedKey(file.id))).not.toBeNull();

      const result = await runRetention('media');
      expect(result.finished).toBe(true);
      expect(result.mediaFilesDeleted).toBeGreaterThanOrEqual(2);
      expect(await rowsOf([...expired, current].map((f) => f.id))).toEqual([current.id]);
      for (const file of expired) expect(await storage.open(storedKey(file.id))).toBeNull();
      const kept = await storage.open(storedKey(current.id));
      expect(kept?.bytes).toBe('png bytes'.length);
      kept?.stream.destroy();
    });

    it('deletes batch files (issue 56) past their organization\'s retention the same way, and keeps a file without expiry', async () => {
      const stored = async (id: string, expiresAt: Date | null) => {
        const storageKey = `files/${orgDefault}/${id}`;
        await storage.put(storageKey, Readable.from([Buffer.from('{"custom_id":"a"}\n')]));
        await database.db.insert(files).values({ id, orgId: orgDefault, keyId: 'key_x', lineageId: 'key_x', projectId: 'proj_x', purpose: 'batch', filename: 'in.jsonl', bytes: 18, storageKey, expiresAt });
        return storageKey;
      };
      const old = await stored(`file_${run}_old`, new Date(Date.now() - HOUR));
      const fresh = await stored(`file_${run}_fresh`, new Date(Date.now() + HOUR));
      const forever = await stored(`file_${run}_forever`, null);
      // Past its retention too, but a batch still running reads it: kept until that batch ends.
      const inUse = await stored(`file_${run}_inuse`, new Date(Date.now() - HOUR));
      await database.db.insert(batches).values({ id: `batch_${run}_running`, orgId: orgDefault, keyId: 'key_x', lineageId: 'key_x', projectId: 'proj_x', wire: 'openai', endpoint: '/v1/chat/completions', inputFileId: `file_${run}_inuse`, completionWindow: '24h', chunkItems: 100, status: 'in_progress', expiresAt: new Date(Date.now() + HOUR) });
      await runRetention('batch-files');
      const left = (await database.db.select({ id: files.id }).from(files).where(inArray(files.id, [`file_${run}_old`, `file_${run}_fresh`, `file_${run}_forever`, `file_${run}_inuse`]))).map((r) => r.id).sort();
      expect(left).toEqual([`file_${run}_forever`, `file_${run}_fresh`, `file_${run}_inuse`]);
      (await storage.open(inUse))!.stream.destroy();
      expect(await storage.open(old)).toBeNull();
      for (const key of [fresh, forever]) (await storage.open(key))!.stream.destroy();
    });

    it('deletes in batches, and a file whose object cannot be removed keeps its row for the next run', async () => {
      const expired = [];
      for (let i = 0; i < 5; i++) expired.push(await keepAt(new Date(Date.now() - (2 + i) * HOUR)));
      const stuck = expired[2]!;
      const failing: OutputStorage = {
        ...storage,
        remove: async (key) => {
          if (key === storedKey(stuck.id)) throw new Error('object store unavailable');
          await storage.remove(key);
        },
      };
      let batches = 0;
      const step = await deleteExpiredMediaFiles(database.db, failing, new Date(), { budgetMs: 60_000, batchRows: 2, onBatch: () => batches++ });
      expect(step.done).toBe(true);
      expect(step.failed).toBeGreaterThanOrEqual(1);
      expect(step.deleted).toBeGreaterThanOrEqual(4);
      expect(batches).toBeGreaterThanOrEqual(3);
      expect(await rowsOf(expired.map((f) => f.id))).toEqual([stuck.id]);
      expect(await storage.open(storedKey(stuck.id))).not.toBeNull();

      // The next run, with the store back, finishes it.
      await runRetention('media-stuck');
      expect(await rowsOf([stuck.id])).toEqual([]);
      expect(await storage.open(storedKey(stuck.id))).toBeNull();
    });
  });

  it('the maintenance worker made an hourly schedule on the maintenance queue that skips overlapping runs; it runs the workflow', async () => {
    const handle = temporal.schedule.getHandle(scheduleIds.requestLogRetention(prefix));
    const described = await handle.describe();
    expect(described.spec.intervals).toEqual([expect.objectContaining({ every: REQUEST_LOG_RETENTION_EVERY_MS })]);
    expect(described.policies.overlap).toBe(ScheduleOverlapPolicy.SKIP);
    expect(described.action).toMatchObject({ type: 'startWorkflow', workflowType: 'requestLogRetention', taskQueue: taskQueue('maintenance', prefix) });
    expect(described.state.paused).toBe(false);

    // Starting again updates in place (a new interval), and does not fail on the existing schedule.
    await ensureMaintenanceSchedules(temporal, prefix, 0.5);
    expect((await handle.describe()).spec.intervals?.[0]?.every).toBe(REQUEST_LOG_RETENTION_EVERY_MS / 2);
    await ensureMaintenanceSchedules(temporal, prefix, 1);

    await handle.trigger();
    let workflowId: string | undefined;
    for (let i = 0; i < 50 && !workflowId; i++) {
      workflowId = (await handle.describe()).info.recentActions[0]?.action.workflow.workflowId;
      if (!workflowId) await sleep(200);
    }
    expect(workflowId).toMatch(new RegExp(`^${scheduleIds.requestLogRetention(prefix)}-`));
    const result = await temporal.workflow.getHandle(workflowId!).result() as RequestLogRetentionResult;
    await saveHistory('request-log-retention-scheduled', workflowId!);
    expect(result.finished).toBe(true);
  });
});
