import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../scripts/lib/ports';
import { resolveTemporalCli } from '../../scripts/lib/temporal-cli';
import { DEV_SERVER_GO_RUNTIME, DEV_SERVER_SQLITE_PRAGMAS, startTemporalDevServer, type DevServer } from '../../scripts/lib/temporal-dev-server';

/** What the running server process was given: its arguments and its environment (Linux /proc). */
function processOf(server: DevServer): { args: string[]; env: Map<string, string> } {
  const pid = server.process.pid!;
  const args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  const env = new Map(fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean).map((kv) => {
    const at = kv.indexOf('=');
    return [kv.slice(0, at), kv.slice(at + 1)] as [string, string];
  }));
  return { args, env };
}

/**
 * The dev server as `npm start` runs it (issue 34: the settings bench:retry-floor measured): its
 * SQLite file in write-ahead-log mode, eager activities, the Go collector relaxed unless the
 * operator set their own.
 */
describe('the Temporal dev server as npm start runs it', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-devserver-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('keeps its state in a write-ahead log, runs eager activities and GOGC=400', async () => {
    const dbFile = path.join(dir, 'temporal.sqlite');
    const server = await startTemporalDevServer({ cliPath: resolveTemporalCli(), port: await freePort(), dbFile, sqlitePragmas: DEV_SERVER_SQLITE_PRAGMAS, goRuntime: DEV_SERVER_GO_RUNTIME });
    try {
      const { args, env } = processOf(server);
      expect(env.get('GOGC')).toBe('400');
      expect(args).toEqual(expect.arrayContaining(['--sqlite-pragma', 'journal_mode=wal', 'system.enableActivityEagerExecution=true']));
      // SQLite keeps a -wal file beside the database only in write-ahead-log mode.
      expect(fs.existsSync(`${dbFile}-wal`)).toBe(true);
    } finally {
      await server.stop();
    }
  }, 90_000);

  it("leaves the operator's own GOGC alone", async () => {
    const before = process.env.GOGC;
    process.env.GOGC = '150';
    let server: DevServer | null = null;
    try {
      server = await startTemporalDevServer({ cliPath: resolveTemporalCli(), port: await freePort(), goRuntime: DEV_SERVER_GO_RUNTIME });
      expect(processOf(server).env.get('GOGC')).toBe('150');
    } finally {
      if (before === undefined) delete process.env.GOGC;
      else process.env.GOGC = before;
      await server?.stop();
    }
  }, 90_000);
});
