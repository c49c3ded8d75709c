#!/usr/bin/env node
// `npm run build`: scripts/build.ts, compiled by esbuild (a production dependency) and run with
// plain node, so building needs no TypeScript loader: a deploy installed without dev packages
// builds dist/ and runs it. The compiled script is written beside the source (scripts/.build-<pid>.cjs,
// not committed, removed after) so that the paths its modules resolve from their folder stay the
// same; one file a process, since the API and each worker may start a build at the same moment.
// Arguments pass through (`--out-dir <dir>`). Plain Node with no other dependency.
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const compiled = path.join(__dirname, `.build-${process.pid}.cjs`);
require('esbuild').buildSync({
  absWorkingDir: root,
  entryPoints: ['scripts/build.ts'],
  outfile: compiled,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node24',
  packages: 'external',
  logLevel: 'error',
});
try {
  const result = spawnSync(process.execPath, [compiled, ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' });
  process.exitCode = result.status ?? 1;
} finally {
  require('node:fs').rmSync(compiled, { force: true });
}
