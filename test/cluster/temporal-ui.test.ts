import fs from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import type { Browser } from 'puppeteer-core';
import { taskQueue, type VideoJobInput } from '../../workflows/definitions';
import { launchBrowser } from '../helpers/browser';
import { startTestApi, testDatabase, uniquePrefix, type TestApi } from '../helpers/harness';
import { testTemporalClient } from '../helpers/sealing-keys';
import { createTenant, type Tenant } from '../helpers/tenants';

// The page's own globals, inside page.evaluate (the browser tests declare them the same way).
declare const document: { body: { innerText: string }; getElementById(id: string): { textContent: string | null } | null };

const SCREENSHOT = path.resolve(__dirname, '../../docs/temporal-ui-codec.png');

/**
 * The Temporal UI of a cluster as operators run it (issue 55, section 2), in real Chromium: an
 * operator signs in at the gateway's codec endpoint and reads a video job's input, sealed in
 * Temporal, in the UI; a token of another organization signs in to nothing and reads nothing.
 */
describe('the Temporal UI reads sealed payloads through the codec endpoint', () => {
  const prefix = uniquePrefix('ui');
  const uiUrl = process.env.GW_TEST_TEMPORAL_UI_URL!;
  const database = testDatabase();
  let operator: Tenant;
  let stranger: Tenant;
  let api: TestApi;
  let browser: Browser;
  let connection: Connection;

  beforeAll(async () => {
    operator = await createTenant(database.db);
    stranger = await createTenant(database.db);
    // On the port the UI's codec endpoint names (test/helpers/global-setup.ts).
    api = await startTestApi({ env: { GW_TEMPORAL_UI_URL: uiUrl, GW_OPERATOR_ORG_ID: operator.orgId }, port: Number(process.env.GW_TEST_CODEC_PORT) });
    browser = await launchBrowser();
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! });
  });
  afterAll(async () => {
    await browser?.close();
    await connection?.close();
    await api?.close();
    await database.close();
  });

  /** A browser context (its own cookies) signed in with `token` at the codec endpoint; what the page answered. */
  async function signedIn(token: string) {
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await page.setViewport({ width: 1400, height: 1000 });
    await page.goto(`${api.url}/temporal-codec/session`);
    await page.type('#t', token);
    await page.click('button');
    await page.waitForFunction(() => (document.getElementById('r')?.textContent ?? '') !== '');
    return { page, answer: await page.$eval('#r', (e) => e.textContent ?? '') };
  }

  it('an operator reads a job\'s input in the UI; another organization\'s token cannot', async () => {
    const prompt = `a lighthouse in a storm, operator view ${prefix}`;
    const jobId = `job_${prefix.replace(/[^a-z0-9]/g, '')}ui`;
    // A video job's workflow, its input sealed like every payload (no worker runs it here).
    const input = { jobId, orgId: operator.orgId, job: { id: jobId, orgId: operator.orgId, request: { prompt } }, candidates: [], failover: {}, maxRetries: 0, checkIntervalsMs: [], retentionMs: 0 } as unknown as VideoJobInput;
    const handle = await testTemporalClient(connection).workflow.start('videoJob', { workflowId: jobId, taskQueue: taskQueue('jobs', prefix), args: [input] });

    const { page, answer } = await signedIn(operator.token);
    expect(answer).toMatch(/^Signed in/);
    await page.goto(`${uiUrl}/namespaces/default/workflows/${jobId}`);
    await page.waitForFunction((text: string) => document.body.innerText.includes(text), { timeout: 60_000 }, prompt);
    fs.mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT as `${string}.png` });

    const other = await signedIn(stranger.token);
    expect(other.answer).not.toMatch(/^Signed in/);
    await other.page.goto(`${uiUrl}/namespaces/default/workflows/${jobId}`);
    await other.page.waitForFunction((id: string) => document.body.innerText.includes(id), { timeout: 60_000 }, jobId);
    // Given time to decode, it still shows no prompt.
    await new Promise((r) => setTimeout(r, 5_000));
    expect(await other.page.evaluate(() => document.body.innerText)).not.toContain(prompt);
    await handle.terminate('test over');
  }, 180_000);
});
