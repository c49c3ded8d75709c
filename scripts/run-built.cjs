#!/usr/bin/env node
// `npm run api` and `npm run worker:<queue>`: a production process from dist/ with plain node.
//
//   node scripts/run-built.cjs <entry>    e.g. api/server, workers/jobs: runs dist/<entry>.js
//   node scripts/run-built.cjs            only makes sure dist/ is current (the bench)
//
// When dist/ is missing, or a file it was built from changed since (dist/build.json lists them),
// it builds first (`npm run build`, scripts/build.cjs: plain node, no tsx; progress on stderr:
// stdout is the process's log). Then the
// compiled entry runs in this same process, so its pid, signals and exit code are the entry's.
// package.json starts it with `exec`: npm passes a SIGTERM on to its shell, and without `exec` the
// shell (dash) would stop there and leave this process running without a graceful shutdown.
// Plain Node with no dependencies, like scripts/bootstrap.cjs.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const dist = path.join(root, 'dist');

/** Why dist/ cannot be run as it is, or null when it is current. */
function staleReason() {
  let info;
  try {
    info = JSON.parse(fs.readFileSync(path.join(dist, 'build.json'), 'utf8'));
  } catch {
    return 'dist/ is missing';
  }
  for (const file of info.inputs) {
    let modified;
    try {
      modified = fs.statSync(path.join(root, file)).mtimeMs;
    } catch {
      return `${file} is gone since the last build`;
    }
    if (modified > info.startedAt) return `${file} changed since the last build`;
  }
  return null;
}

/** Builds when needed; false when the build failed (it printed why). */
function ensureBuilt() {
  const reason = staleReason();
  if (!reason) return true;
  console.error(`[build] ${reason}: building dist/ first`);
  const result = spawnSync(process.execPath, [path.join(__dirname, 'build-dist.cjs')], { cwd: root, stdio: ['ignore', 2, 2] });
  return result.status === 0;
}

/** The Node.js major the product runs on (scripts/setup-node; each built file checks it too). */
const NODE_MAJOR = 24;

function main() {
  if (Number(process.versions.node.split('.')[0]) < NODE_MAJOR) {
    console.error(`gw: this process needs Node.js ${NODE_MAJOR} or later; this is ${process.version}`);
    return 1;
  }
  const entry = process.argv[2];
  if (!ensureBuilt()) return 1;
  if (!entry) return 0;
  const { entries } = JSON.parse(fs.readFileSync(path.join(dist, 'build.json'), 'utf8'));
  if (!entries.includes(entry)) {
    console.error(`run-built: ${entry} is not built; one of ${entries.join(', ')}`);
    return 2;
  }
  // The entry's own argv: as if started as `node dist/<entry>.js`.
  const file = path.join(dist, `${entry}.js`);
  process.argv.splice(1, 2, file);
  require(file);
  return undefined;
}

const code = main();
if (code !== undefined) process.exitCode = code;
