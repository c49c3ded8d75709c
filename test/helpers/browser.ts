import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import puppeteer, { type Browser } from 'puppeteer-core';

/** Where a Chromium may be: CHROME_PATH first, then Debian's package and the usual names on PATH. */
const CANDIDATES = ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable'];

export function findBrowser(): string | null {
  if (process.env.CHROME_PATH) return fs.existsSync(process.env.CHROME_PATH) ? process.env.CHROME_PATH : null;
  for (const name of CANDIDATES) {
    try {
      const found = execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
      if (found) return found;
    } catch {
      // Not this one.
    }
  }
  return null;
}

/**
 * A real headless Chromium for the console's browser tests. Without one the suite fails and
 * says so: a browser test that passes without a browser would prove nothing.
 */
export async function launchBrowser(): Promise<Browser> {
  const executablePath = findBrowser();
  if (!executablePath) {
    throw new Error('No Chromium found for the console browser tests: install Debian\'s `chromium` package (npm test does it when it runs as root with apt-get) or set CHROME_PATH.');
  }
  return puppeteer.launch({
    executablePath,
    headless: true,
    // Root in a container has no user namespace sandbox; the pages are our own.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
}
