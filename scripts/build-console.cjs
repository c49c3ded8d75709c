#!/usr/bin/env node
// Builds the operator console (console/, Vite) into console/dist when it is missing or older
// than its sources; `--force` always builds. Plain Node: run by bootstrap.cjs before start and
// test, and by `npm run build:console`.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const consoleDir = path.join(root, 'console');
const built = path.join(consoleDir, 'dist', 'index.html');

function newestSource(dir) {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'dist' || entry.name === 'node_modules') continue;
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(full) : fs.statSync(full).mtimeMs);
  }
  return newest;
}

function stale() {
  if (!fs.existsSync(built)) return true;
  const sources = Math.max(newestSource(consoleDir), fs.statSync(path.join(root, 'package-lock.json')).mtimeMs);
  return fs.statSync(built).mtimeMs < sources;
}

function main() {
  if (!process.argv.includes('--force') && !stale()) return 0;
  console.error('[setup] building the operator console (console/ with Vite) into console/dist...');
  const started = Date.now();
  const vite = path.join(root, 'node_modules', '.bin', 'vite');
  const result = spawnSync(vite, ['build', '--config', path.join(consoleDir, 'vite.config.ts')], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) {
    console.error('[setup] the console build failed (see above); the API still runs, and /console says it is not built');
    return 1;
  }
  console.error(`[setup] console built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return 0;
}

process.exitCode = main();
