import { spawn } from 'node:child_process';
import path from 'node:path';

/**
 * The money soak's short run (issue 54, section 2), fixed seed: three API processes and the
 * workers on services of the soak's own, 20 s of mixed traffic with an API process and the jobs
 * worker SIGKILLed, Redis and Postgres restarted and Temporal paused for 20 s; then the ledger
 * against the sandbox's bill, the limits, the request log and the jobs. The full run is
 * `npm run soak:money` (bench/README.md, "Money under faults").
 */
describe('money soak, short run (npm run soak:money, seed 1, 20 s)', () => {
  it('charges no request less than the provider billed, holds every limit within its bound, logs every served request once, renders every job once', async () => {
    const root = path.resolve(__dirname, '..', '..');
    // The soak starts its own Postgres, Redis and Temporal: nothing of the test run's is passed on.
    const env: Record<string, string | undefined> = { ...process.env, SOAK_SECONDS: '20', SOAK_SEEDS: '1' };
    for (const name of ['DATABASE_URL', 'REDIS_URL', 'TEMPORAL_ADDRESS', 'REDIS_KEY_PREFIX', 'GW_TASK_QUEUE_PREFIX', 'GW_DATA_DIR']) delete env[name];
    const child = spawn(process.execPath, ['--import', 'tsx', path.join('bench', 'soak-money.ts')], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    const summaryLine = out.split('\n').find((l) => l.startsWith('SOAK_SUMMARY '));
    // On failure the soak's own output says what it found: its findings are in the summary, shown in the diff.
    expect({ code, summary: summaryLine ? JSON.parse(summaryLine.slice('SOAK_SUMMARY '.length)) : out.slice(-3000) }).toMatchObject({ code: 0, summary: { ok: true, findingCount: 0, findings: [] } });
  }, 300_000);
});
