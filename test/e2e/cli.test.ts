import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { randomClientAddress, startTestApi, type TestApi } from '../helpers/harness';

const run = promisify(execFile);
const GW = path.resolve(__dirname, '../../scripts/gw.cjs');

async function gw(...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const { stdout, stderr } = await run('node', [GW, ...args], { env: process.env });
    return { stdout, stderr, code: 0 };
  } catch (err) {
    const e = err as { stdout: string; stderr: string; code: number };
    return { stdout: e.stdout, stderr: e.stderr, code: e.code };
  }
}

describe('gw operator CLI', () => {
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi();
  });
  afterAll(() => api.close());

  async function readOrganization(token: string) {
    const res = await fetch(`${api.url}/manage/v1/organization`, {
      headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': randomClientAddress() },
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> & { error?: { code: string } } };
  }

  it('bootstrap --json prints an organization whose token works on a management read', async () => {
    const result = await gw('bootstrap', '--org', 'CLI Co', '--plan', 'team', '--json');
    expect(result.code).toBe(0);
    const out = JSON.parse(result.stdout) as { org_id: string; member_id: string; management_token: string };
    expect(Object.keys(out).sort()).toEqual(['management_token', 'member_id', 'org_id']);
    const read = await readOrganization(out.management_token);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: out.org_id, name: 'CLI Co', plan: 'team' });

    // Each call makes a new organization.
    const again = JSON.parse((await gw('bootstrap', '--org', 'CLI Co', '--json')).stdout) as { org_id: string };
    expect(again.org_id).not.toBe(out.org_id);
  });

  it('token create issues a narrower token whose scopes are enforced', async () => {
    const org = JSON.parse((await gw('bootstrap', '--org', 'Scoped', '--json')).stdout) as { org_id: string };
    const narrow = await gw('token', 'create', '--org', org.org_id, '--scopes', 'analytics:read', '--role', 'admin', '--json');
    expect(narrow.code).toBe(0);
    const token = (JSON.parse(narrow.stdout) as { management_token: string }).management_token;
    const refused = await readOrganization(token);
    expect(refused.status).toBe(403);
    expect(refused.body.error?.code).toBe('insufficient_scope');

    const reader = JSON.parse((await gw('token', 'create', '--org', org.org_id, '--scopes', '*:read', '--json')).stdout) as { management_token: string };
    expect((await readOrganization(reader.management_token)).status).toBe(200);
  });

  it('refuses bad usage with one clear line and exit code 2', async () => {
    const missing = await gw('token', 'create', '--scopes', 'a:read');
    expect(missing.code).toBe(2);
    expect(missing.stderr.split('\n')[0]).toBe('gw: --org is required');
    const badPlan = await gw('bootstrap', '--org', 'X', '--plan', 'platinum');
    expect(badPlan.code).toBe(2);
    expect(badPlan.stderr).toMatch(/--plan must be one of trial, team, business/);
  });
});
