import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { CONSOLE_BUILD_DIR } from '../../api/console';
import { recordDetection } from '../../core/findings/store';
import { issueManagementToken } from '../../core/tenancy/management-tokens';
import { launchBrowser } from '../helpers/browser';
import { startChatFixture, type ChatFixture, type Loose } from '../helpers/chat-fixture';
import { randomClientAddress, startTestWorkers, uniquePrefix } from '../helpers/harness';
import { until } from '../helpers/until';

// The browser's globals, for the functions puppeteer runs in the page (this Node program has no DOM types).
/* eslint-disable @typescript-eslint/no-explicit-any */
declare const document: any, window: any, sessionStorage: any, location: any;
type HTMLElement = { innerText: string };
/* eslint-enable @typescript-eslint/no-explicit-any */

const AXE = require.resolve('axe-core/axe.min.js');
const SCREENSHOTS = path.resolve(__dirname, '../../docs/console');

/**
 * Issue 25: the operator console in a real headless Chromium against a real API, Postgres,
 * Redis and the sandbox providers. Screenshots are written to docs/console/ when
 * CONSOLE_SCREENSHOTS=1 (they are committed; the README links them).
 */
describe('operator console in a browser', () => {
  let f: ChatFixture;
  let workers: Awaited<ReturnType<typeof startTestWorkers>> | null = null;
  const prefix = uniquePrefix('console');
  const env = { GW_TASK_QUEUE_PREFIX: prefix, GW_SCHEDULE_SCALE: '0.00003', GW_ALLOW_PRIVATE_NETWORK: 'true', GW_TEMPORAL_UI_URL: 'http://temporal-ui.test:8233', GW_TRACE_URL_TEMPLATE: 'http://jaeger.test:16686/trace/{trace_id}' };
  let browser: Browser;
  let page: Page;
  /** Every management API call the page made, as `METHOD path?query`. */
  let calls: string[] = [];

  const open = async (where: string) => {
    calls = [];
    await page.goto(`${f.api.url}/console${where}`, { waitUntil: 'networkidle0' });
  };
  const text = () => page.evaluate(() => document.body.innerText);
  const waitText = (needle: string) => page.waitForFunction((n) => document.body.innerText.includes(n), { timeout: 15_000 }, needle);
  const shot = async (name: string) => {
    if (process.env.CONSOLE_SCREENSHOTS !== '1') return;
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  };
  /** axe-core on the page as it is: no serious or critical violation. */
  const accessible = async (name: string) => {
    await page.addScriptTag({ path: AXE });
    const violations = await page.evaluate(async () => {
      const result = await (window as unknown as { axe: { run(): Promise<{ violations: Array<{ id: string; impact: string; nodes: unknown[] }> }> } }).axe.run();
      return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.nodes.length})`);
    });
    expect([name, violations]).toEqual([name, []]);
  };
  const chat = async (secret: string, model: string, tags: Record<string, string>, headers: Record<string, string> = {}) => {
    const res = await fetch(`${f.api.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress(), ...headers },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Say hello' }], metadata: { tags } }),
    });
    expect(res.status).toBe(200);
    await res.text();
    return res.headers.get('x-gw-request-id')!;
  };

  beforeAll(async () => {
    if (!fs.existsSync(path.join(CONSOLE_BUILD_DIR, 'index.html'))) throw new Error('The console is not built: npm test builds it (scripts/build-console.cjs); or run `npm run build:console`.');
    // The console's tenant is the operator's own: only its tokens see Temporal UI links.
    f = await startChatFixture(env, { operator: true });
    workers = await startTestWorkers(['jobs'], prefix, env);
    await f.connect('openai');
    browser = await launchBrowser();
    page = await browser.newPage();
    // axe-core is injected as an inline script, which the console's policy rightly refuses.
    await page.setBypassCSP(true);
    await page.setViewport({ width: 1280, height: 900 });
    page.on('request', (req) => {
      const url = new URL(req.url());
      if (url.pathname.startsWith('/manage/v1/')) calls.push(`${req.method()} ${url.pathname.slice('/manage/v1'.length)}${url.search}`);
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await workers?.shutdown();
    await f?.close();
  });

  it('signs in with a management token kept in session storage, never in the URL or a cookie', async () => {
    await open('/');
    await shot('sign-in');
    await accessible('sign in');
    await page.type('#token', f.tenant.token);
    await page.click('button[type=submit]');
    await waitText('Spend against limits');
    expect(page.url()).not.toContain(f.tenant.token);
    expect(await page.evaluate(() => document.cookie)).toBe('');
    expect(await page.evaluate(() => sessionStorage.getItem('gw.console.token'))).toBe(f.tenant.token);
  });

  let keySecret = '';
  it('creates a key and shows its secret once, then rotates it', async () => {
    await open('/keys');
    await page.type('#key-label', 'console key');
    await page.click('form[aria-label="Create a key"] button[type=submit]');
    await page.waitForSelector('[data-testid=secret]');
    keySecret = await page.$eval('[data-testid=secret]', (el) => el.textContent ?? '');
    expect(keySecret.length).toBeGreaterThan(20);
    expect(await chat(keySecret, 'openai/gpt-4o-mini', { team: 'warmup' })).toBeTruthy();
    await shot('keys');
    await accessible('keys');
    // Dismissed, and not shown again on a fresh load.
    await page.click('.secret button:last-of-type');
    await open('/keys');
    await waitText('console key');
    expect(await text()).not.toContain(keySecret);

    // Forms of the page's own, never browser prompts: any dialog is recorded, and fails the test below.
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    await page.click('button[aria-label="Rotate console key"]');
    await page.waitForSelector('form[aria-label="Rotate console key"]');
    await page.$eval('#key-action-value', (el) => { (el as unknown as { value: string }).value = ''; });
    await page.type('#key-action-value', '0');
    await page.click('form[aria-label="Rotate console key"] button[type=submit]');
    await page.waitForSelector('[data-testid=secret]');
    const rotated = await page.$eval('[data-testid=secret]', (el) => el.textContent ?? '');
    expect(rotated).not.toBe(keySecret);
    keySecret = rotated;

    // A monthly limit on the new key, from its row.
    await open('/keys');
    await waitText('console key');
    await page.click('button[aria-label="Limit console key"]');
    await page.waitForSelector('form[aria-label="Monthly limit of console key"]');
    await accessible('a key action form');
    await page.type('#key-action-value', '25');
    await page.click('form[aria-label="Monthly limit of console key"] button[type=submit]');
    await waitText('$25 monthly');
    // The key's project by its name, its id on hover.
    const project = await page.$eval('table.data tbody tr td:nth-child(3) span', (el) => [el.textContent, el.getAttribute('title')]);
    expect(project[1]).toMatch(/^proj_/);
    expect(project[0]).not.toBe(project[1]);
    expect(dialogs).toEqual([]);
  });

  it('finds chat requests in the request log by a tag filter kept in the URL', async () => {
    const ids = [await chat(keySecret, 'openai/gpt-4o-mini', { team: 'console-a' }), await chat(keySecret, 'openai/gpt-4o-mini', { team: 'console-a' })];
    const other = await chat(keySecret, 'openai/gpt-4o-mini', { team: 'console-b' });
    await f.settle();
    await new Promise((r) => setTimeout(r, 700));
    await open('/requests');
    await page.type('#f-tags', 'team=console-a');
    await page.click('form[aria-label="Request log filters"] button[type=submit]');
    await page.waitForFunction(() => location.search.includes('tags.team=console-a'));
    await page.waitForFunction(() => document.querySelectorAll('table.data tbody tr').length === 2, { timeout: 15_000 });
    expect(calls.filter((c) => c.startsWith('GET /requests')).at(-1)).toContain('tags.team=console-a');
    // The URL alone brings the same view back.
    await open('/requests?tags.team=console-a');
    await page.waitForFunction(() => document.querySelectorAll('table.data tbody tr').length === 2, { timeout: 15_000 });
    const links = await page.$$eval('table.data tbody a', (as) => as.map((a) => a.getAttribute('href') ?? ''));
    expect(links.map((l) => l.split('/').pop()).sort()).toEqual([...ids].sort());
    expect(links.join(' ')).not.toContain(other);
    await shot('requests');
    await accessible('request log');
  });

  it('opens one request\'s attempts after a failover', async () => {
    const failing = await f.connect('openai', { directives: 'status=503', name: 'failing primary' });
    const healthy = await f.connect('anthropic', { name: 'healthy fallback' });
    const route = await f.client.post<Loose>('/routes', {
      slug: 'console-failover', targets: [{ connection_id: failing, model: 'gpt-4o-mini' }, { connection_id: healthy, model: 'claude-3-5-haiku-latest' }],
    });
    expect(route.status).toBe(201);
    await f.settle();
    // Sent in the caller's own trace: the request page links to it in the tracing UI.
    const traceId = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
    const id = await chat(keySecret, 'console-failover', { team: 'failover' }, { traceparent: `00-${traceId}-1122334455667788-01` });
    await new Promise((r) => setTimeout(r, 700));
    await open(`/requests/${id}`);
    await page.waitForSelector('tr.attempt');
    const attempts = await page.$$eval('tr.attempt', (rows) => rows.map((r) => (r as HTMLElement).innerText));
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    // Connections by name, their ids on hover.
    expect(attempts[0]).toContain('failing primary');
    expect(attempts[0]).toMatch(/server_error|503/);
    expect(attempts.at(-1)).toContain('healthy fallback');
    expect(attempts.at(-1)).toContain('ok');
    const hovers = await page.$$eval('tr.attempt span[title]', (spans) => spans.map((x) => x.getAttribute('title')));
    expect(hovers[0]).toBe(failing);
    expect(hovers.at(-1)).toBe(healthy);
    // The key by its label.
    await waitText('console key');
    expect(await page.$eval(`a[href="http://jaeger.test:16686/trace/${traceId}"]`, (a) => a.textContent)).toContain(traceId);
    await shot('request');
    await accessible('one request');
  });

  it('says which client protocol each request came in by', async () => {
    const post = async (path: string, body: Record<string, unknown>) => {
      const res = await fetch(`${f.api.url}${path}`, { method: 'POST', headers: { 'x-api-key': keySecret, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() }, body: JSON.stringify(body) });
      expect(res.status).toBe(200);
      await res.text();
      return res.headers.get('x-gw-request-id')!;
    };
    const messages = await post('/v1/messages', { model: 'openai/gpt-4o-mini', max_tokens: 50, messages: [{ role: 'user', content: 'Say hello' }] });
    const embeddings = await post('/v1/embeddings', { model: 'openai/text-embedding-3-small', input: 'hello' });
    await new Promise((r) => setTimeout(r, 700));
    await open(`/requests/${messages}`);
    await waitText('Anthropic Messages');
    await open(`/requests/${embeddings}`);
    await waitText('OpenAI Embeddings');
    await open('/requests');
    await waitText('OpenAI Chat Completions');
    await accessible('request log with protocols');
  });

  it('acknowledges a finding from the inbox', async () => {
    const now = new Date();
    await recordDetection(f.database.db, {
      orgId: f.tenant.orgId, type: 'spend.anomaly', severity: 'warning', title: 'Console test spike', summary: 'A spike made for the console test.',
      scope: { kind: 'organization', id: f.tenant.orgId }, subject: {}, window: { from: new Date(now.getTime() - 3_600_000), to: now },
      observed: 40, expected: 1.1, threshold: 6, evidence: { z: 26 },
    }, now);
    await open('/findings');
    await waitText('Console test spike');
    await shot('findings');
    await accessible('findings');
    await page.click('.findings button');
    await page.waitForFunction(() => !document.body.innerText.includes('Console test spike'), { timeout: 15_000 });
    await open('/findings?status=acknowledged');
    await waitText('Console test spike');
  });

  it('shows a cost center\'s share in the usage chart', async () => {
    const center = await f.client.post<Loose>('/cost_centers', { name: 'Console team', code: 'CONSOLE' });
    await f.client.post('/cost_center_rules', { match: { tags: { team: 'console-c*' } }, priority: 1, cost_center_id: center.body.id });
    await f.settle();
    for (let i = 0; i < 3; i++) await chat(keySecret, 'openai/gpt-4o-mini', { team: 'console-cc' });
    await new Promise((r) => setTimeout(r, 700));
    await open('/usage?group_by=cost_center&bucket=day&days=1');
    await waitText('Console team');
    const caption = await page.$eval('figure.chart figcaption', (el) => el.textContent ?? '');
    expect(caption).toMatch(/Console team: \$[0-9.e-]+ \([0-9.]+%\)/);
    expect(caption).toContain('unallocated');
    // Every bucket of the span, the empty ones too: a day back from this hour touches two days.
    expect(caption).toMatch(/ over 2 days\./);
    // Hour buckets over a day: the last 24 hours and this one, whatever had traffic.
    await open('/usage?bucket=hour&days=1');
    await page.waitForFunction(() => / over 2[45] hours/.test(document.querySelector('figure.chart figcaption')?.textContent ?? ''), { timeout: 15_000 });
    await open('/usage?group_by=cost_center&bucket=day&days=1');
    await waitText('Console team');
    await shot('usage');
    await accessible('usage');
    // Grouped by a tag, from the URL alone.
    await open('/usage?group_by=tags.team&bucket=day&days=1');
    await waitText('console-cc');
    expect(await page.$eval('#u-tag', (el) => (el as unknown as { value: string }).value)).toBe('team');

    // The cost pages: the rule's versions on request, a commitment's burn-down.
    const start = new Date(Date.now() - 10 * 86_400_000).toISOString();
    const end = new Date(Date.now() + 20 * 86_400_000).toISOString();
    expect((await f.client.post('/commitments', { provider_kind: 'openai', label: 'Annual OpenAI', amount_usd: 100, period_start: start, period_end: end, discount_pct: 10 })).status).toBe(201);
    await open('/costs');
    await waitText('Annual OpenAI');
    await page.click('button[aria-label^="Versions of rule"]');
    await page.waitForSelector('ol.versions li');
    expect(await page.$eval('ol.versions', (el) => el.textContent ?? '')).toContain('v1');
  });

  it('opens a job\'s timeline, linked to its workflow in the Temporal UI', async () => {
    const res = await fetch(`${f.api.url}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keySecret}`, 'content-type': 'application/json', 'x-forwarded-for': randomClientAddress() },
      body: JSON.stringify({ model: 'openai/sora-2', prompt: 'A console test [sandbox render_ms=50]', duration_seconds: 4 }),
    });
    expect(res.status).toBe(202);
    const job = await res.json() as Loose;
    const done = await until(async () => {
      const read = await f.client.get<Loose>(`/jobs/${job.id}`);
      return ['succeeded', 'failed', 'canceled'].includes(read.body.status) ? read.body : null;
    }, 'the video job to end');
    expect([done.status, done.error]).toEqual(['succeeded', null]);
    await open('/jobs?status=succeeded');
    await waitText(job.id);
    await shot('jobs');
    await accessible('jobs');
    await page.click(`a[href="/console/jobs/${job.id}"]`);
    await page.waitForSelector('ol.timeline li');
    const events = await page.$$eval('ol.timeline li strong', (els) => els.map((e) => e.textContent));
    expect(events).toEqual(expect.arrayContaining(['created', 'started', 'succeeded']));
    const link = await page.$eval('dd a[target=_blank]', (a) => a.getAttribute('href'));
    expect(link).toBe(`http://temporal-ui.test:8233/namespaces/default/workflows/${job.id}`);
    await shot('job');
    await accessible('one job');
  });

  it('lists batches with their progress and cost, and one batch\'s items with what each cost (issue 56)', async () => {
    const lines = Array.from({ length: 3 }, (_, i) => JSON.stringify({ custom_id: `console-${i}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `console batch ${i}` }] } }));
    const form = new FormData();
    form.set('purpose', 'batch');
    form.set('file', new Blob([lines.join('\n')]), 'console.jsonl');
    const auth = { authorization: `Bearer ${keySecret}`, 'x-forwarded-for': randomClientAddress() };
    const file = await (await fetch(`${f.api.url}/v1/files`, { method: 'POST', headers: auth, body: form })).json() as Loose;
    const created = await (await fetch(`${f.api.url}/v1/batches`, {
      method: 'POST', headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' }),
    })).json() as Loose;
    const done = await until(async () => {
      const read = await f.client.get<Loose>(`/batches/${created.id}`);
      return read.body.status === 'completed' ? read.body : null;
    }, 'the batch to complete');
    expect(done.request_counts).toEqual({ total: 3, completed: 3, failed: 0, not_run: 0 });
    await open('/batches');
    await waitText(created.id);
    expect(await text()).toContain('100% (3 of 3)');
    // One model on an OpenAI connection: OpenAI's own batch API ran it.
    expect(await text()).toContain('Provider batch API');
    await shot('batches');
    await accessible('batches');
    await page.click(`a[href="/console/batches/${created.id}"]`);
    await waitText('console-2');
    expect(await text()).toMatch(/3 answered, 0 errors, 0 not run/);
    const rows = (await page.$$eval('table tbody tr', (trs) => trs.map((tr) => (tr as HTMLElement).innerText))).map((r) => r.split('\t'));
    expect(rows.map((r) => r[1])).toEqual(['console-0', 'console-1', 'console-2']);
    for (const row of rows) expect(row[5]).toMatch(/^\$/);
    const link = await page.$eval('dd a[target=_blank]', (a) => a.getAttribute('href'));
    expect(link).toBe(`http://temporal-ui.test:8233/namespaces/default/workflows/${created.id}`);
    await shot('batch');
    await accessible('one batch');
  });

  it('says plainly which pages a token may not read', async () => {
    const narrow = await issueManagementToken(f.database.db, { orgId: f.tenant.orgId, name: 'keys only', scopes: ['keys:read', 'projects:read'], createdByMemberId: f.tenant.memberId });
    await open('/');
    await page.evaluate(() => sessionStorage.clear());
    await open('/');
    await page.type('#token', narrow.token);
    await page.click('button[type=submit]');
    await page.waitForSelector('header nav');
    await open('/costs');
    await waitText('This token may not read cost centers');
    await open('/keys');
    await waitText('console key');
    expect(await text()).not.toContain('may not read keys');
    // Back to the full token for what follows.
    await page.evaluate((t) => sessionStorage.setItem('gw.console.token', t), f.tenant.token);
  });

  it('makes one request per list on each refresh, and answers keyboard navigation', async () => {
    for (const where of ['/', '/usage', '/requests', '/findings', '/jobs', '/batches', '/keys', '/connections', '/costs', '/webhooks', '/tools', '/audit']) {
      await open(where);
      calls = [];
      await page.reload({ waitUntil: 'networkidle0' });
      const afterReload = calls.filter((c) => c.startsWith('GET '));
      expect([where, afterReload.length, new Set(afterReload).size]).toEqual([where, afterReload.length, afterReload.length]);
      expect([where, afterReload.length > 0]).toEqual([where, true]);
      if (!['/', '/usage', '/requests', '/findings', '/jobs', '/batches', '/keys'].includes(where)) {
        await shot(where.slice(1));
        await accessible(where);
      }
    }
    await open('/');
    await waitText('the slowest hour');
    // The overview says the day's error rate, and the time the gateway itself added.
    expect(await text()).toMatch(/\d+ errors \(error rate \d+\.\d%\)/);
    expect(await text()).toMatch(/Error rate \d+\.\d%.*added by the gateway, p95 \d+ ms/s);
    // The top keys by their labels, not their ids.
    expect(await text()).toMatch(/console key[^\n]*: \$/);
    await shot('overview');
    await accessible('overview');
    // The first Tab reaches the skip link, the next ones the pages.
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Usage');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => location.pathname === '/console/usage');
  });
});
