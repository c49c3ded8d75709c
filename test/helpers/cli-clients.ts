import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Command-line clients the tests drive as users do (Claude Code, the Codex CLI), installed from
 * the npm registry once per machine into a folder of their own, not into the project: they are
 * large (a native binary each, from the registry's platform packages) and no part of the product.
 * `GW_TEST_CLIENTS_DIR` moves the folder (default `~/.cache/gw-test-clients`). Each install says
 * one line before and one after; a second test process waiting on the same install finds it done.
 */
export function testClientsDir(): string {
  return process.env.GW_TEST_CLIENTS_DIR ?? path.join(os.homedir(), '.cache', 'gw-test-clients');
}

/** The path of `bin` of `pkg@version`, installed first when missing. */
export function cliClient(pkg: string, version: string, bin: string): string {
  const dir = path.join(testClientsDir(), `${pkg.replace(/[@/]/g, '_')}-${version}`);
  const binary = path.join(dir, 'node_modules', '.bin', bin);
  if (fs.existsSync(binary)) return binary;
  fs.mkdirSync(dir, { recursive: true });
  const lock = path.join(dir, '.installing');
  // One installer at a time; another process waits for it (a stale lock, older than 10 minutes, is taken over).
  for (const deadline = Date.now() + 600_000; ;) {
    try {
      fs.writeFileSync(lock, String(process.pid), { flag: 'wx' });
      break;
    } catch {
      if (fs.existsSync(binary)) return binary;
      const age = Date.now() - (fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 600_000) fs.rmSync(lock, { force: true });
      if (Date.now() > deadline) throw new Error(`waited 10 minutes for another install of ${pkg}@${version} in ${dir}`);
      execFileSync('sleep', ['1']);
    }
  }
  try {
    if (fs.existsSync(binary)) return binary;
    process.stderr.write(`[test setup] installing ${pkg}@${version} for the tests that drive it (npm, once per machine, into ${dir})...\n`);
    const started = Date.now();
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ private: true, name: 'gw-test-client' }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--no-save', `${pkg}@${version}`], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
    if (!fs.existsSync(binary)) throw new Error(`${pkg}@${version} installed no ${bin} in ${dir}`);
    process.stderr.write(`[test setup] ${pkg}@${version} installed (${((Date.now() - started) / 1000).toFixed(0)}s)\n`);
    return binary;
  } finally {
    fs.rmSync(lock, { force: true });
  }
}
