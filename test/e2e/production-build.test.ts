import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { freePort, waitFor } from '../../scripts/lib/ports';
import { BUILD_ENTRIES, type BuildInfo } from '../../scripts/build';
import { taskQueue, workflowIds } from '../../workflows/definitions';
import { uniquePrefix } from '../helpers/harness';
import { testTemporalClient } from '../helpers/sealing-keys';

const ROOT = path.resolve(__dirname, '../..');
const run = promisify(execFile);

/**
 * `npm run build` (scripts/build.ts) and what production runs from it with plain node, no tsx:
 * the compiled API serving, the compiled jobs worker running workflows from the workflow bundle
 * built ahead, which it finds beside its own folder.
 */
/** The compiled build scripts beside scripts/build.ts (scripts/build-dist.cjs writes one a process). */
const compiledBuildScripts = () => fs.readdirSync(path.join(ROOT, 'scripts')).filter((f) => f.startsWith('.build'));

describe('production build', () => {
  // The compiled files `require` their packages: node_modules beside dist/, as in the repository.
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-build-'));
  const dist = path.join(scratch, 'dist');
  const children: ChildProcess[] = [];
  let buildOutput = '';

  /** A compiled entry with plain node; its stderr kept for the failure message. */
  function start(entry: string, env: Record<string, string | undefined>): { child: ChildProcess; stderr: () => string } {
    const child = spawn(process.execPath, [path.join(dist, `${entry}.js`)], { cwd: scratch, env, stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(child);
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    return { child, stderr: () => stderr };
  }

  const exited = (child: ChildProcess) => new Promise<number | null>((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', (code) => resolve(code))));

  beforeAll(async () => {
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(scratch, 'node_modules'));
    // As production builds: plain node, no TypeScript loader (tsx is a development dependency).
    // Two at once, as the API and a worker starting together on a fresh deploy: each must finish.
    const before = compiledBuildScripts();
    const [first] = await Promise.all([1, 2].map(() => run(process.execPath, ['scripts/build-dist.cjs', '--out-dir', dist], { cwd: ROOT })));
    buildOutput = first!.stdout;
    // Each build's compiled script is its own and removed after.
    expect(compiledBuildScripts()).toEqual(before);
  }, 180_000);

  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await Promise.all(children.map(exited));
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('prints its progress and writes each entry, the workflow bundle and the files it was built from', () => {
    expect(buildOutput).toContain('[build] compiling api/server, workers/jobs, workers/webhooks, workers/maintenance, scripts/gw');
    expect(buildOutput).toContain('[build] bundling workflows');
    for (const entry of BUILD_ENTRIES) {
      expect(fs.statSync(path.join(dist, `${entry}.js`)).size).toBeGreaterThan(0);
      expect(fs.existsSync(path.join(dist, `${entry}.js.map`))).toBe(true);
    }
    const bundle = fs.readFileSync(path.join(dist, 'workflow-bundle.js'), 'utf8');
    for (const workflow of ['probeWorkflow', 'videoJob', 'webhookDelivery', 'requestLogRetention']) expect(bundle).toContain(workflow);
    const info = JSON.parse(fs.readFileSync(path.join(dist, 'build.json'), 'utf8')) as BuildInfo;
    expect(info.entries).toEqual(BUILD_ENTRIES);
    expect(info.inputs).toEqual(expect.arrayContaining(['api/server.ts', 'workers/main.ts', 'workflows/index.ts', 'core/catalog/param-rules.json', 'package-lock.json']));
    // No build in progress or replaced build left beside it.
    expect(fs.readdirSync(scratch).sort()).toEqual(['dist', 'node_modules']);
  });

  it('needs no TypeScript loader in production, and a compiled process on a Node older than 24 says so in one line', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; engines: { node: string } };
    expect(pkg.dependencies).not.toHaveProperty('tsx');
    expect(pkg.engines.node).toBe('>=24');
    for (const entry of BUILD_ENTRIES) {
      const check = fs.readFileSync(path.join(dist, `${entry}.js`), 'utf8').split('\n')[0]!;
      const said: string[] = [];
      const exits: number[] = [];
      const older = { versions: { node: '20.20.2' }, version: 'v20.20.2', stderr: { write: (m: string) => said.push(m) }, exit: (code: number) => exits.push(code) };
      new Function('process', check)(older);
      expect([said, exits]).toEqual([['gw: this process needs Node.js 24 or later; this is v20.20.2\n'], [1]]);
      const current = { ...older, versions: { node: '24.22.3' }, version: 'v24.22.3' };
      said.length = 0;
      new Function('process', check)(current);
      expect(said).toEqual([]);
    }
  });

  it('the compiled operator CLI runs with plain node', async () => {
    const { stdout } = await run(process.execPath, [path.join(dist, 'scripts/gw.js'), '--help'], { cwd: scratch });
    expect(stdout).toContain('gw bootstrap --org NAME');
  });

  it('the compiled entries load every module with plain node: a missing setting is one line and exit code 1', async () => {
    const env = { PATH: process.env.PATH, NODE_ENV: 'production' };
    const api = start('api/server', env);
    expect(await exited(api.child)).toBe(1);
    expect(api.stderr().trim()).toMatch(/^gw-api: GW_SEALING_KEYS is not set[^\n]*$/);
    const worker = start('workers/jobs', env);
    expect(await exited(worker.child)).toBe(1);
    expect(worker.stderr().trim()).toMatch(/^gw-worker: DATABASE_URL is not set[^\n]*$/);
  });

  it('the compiled API starts on the real services and answers', async () => {
    const port = await freePort();
    const api = start('api/server', { ...process.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'silent' });
    await waitFor('the compiled API', () => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok), 30_000).catch((err: Error) => {
      throw new Error(`${err.message}; exit code ${api.child.exitCode}, stderr: ${api.stderr()}`);
    });
    // Its start-up loaded the model catalog, an ES module imported dynamically from CommonJS.
    const res = await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: 'Bearer gw-not-a-key' } });
    expect(res.status).toBe(401);
  });

  it('the compiled jobs worker runs workflows from the bundle built ahead', async () => {
    const prefix = uniquePrefix('build');
    const env: Record<string, string | undefined> = { ...process.env, GW_TASK_QUEUE_PREFIX: prefix, LOG_LEVEL: 'silent' };
    // Not the tests' bundle: the one beside dist/workers/.
    delete env.GW_WORKFLOW_BUNDLE;
    const worker = start('workers/jobs', env);
    const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! });
    try {
      const client = testTemporalClient(connection);
      const queue = taskQueue('jobs', prefix);
      const result = client.workflow.execute('probeWorkflow', { taskQueue: queue, workflowId: workflowIds.probe(`${prefix}jobs`), args: [{ message: 'compiled' }] });
      const died = exited(worker.child).then((code) => Promise.reject(new Error(`the compiled worker exited (${code}): ${worker.stderr()}`)));
      died.catch(() => undefined);
      expect(await Promise.race([result, died])).toEqual({ message: 'compiled', handledBy: queue });
    } finally {
      await connection.close();
    }
  });
});
