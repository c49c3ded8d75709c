import type { DatabaseHandle } from '../../core/db/client';
import { randomClientAddress, startTestApi, testDatabase, type TestApi } from './harness';
import { createTenant, type Tenant } from './tenants';

export type Answer<T = Record<string, unknown>> = { status: number; body: T & { error?: { message: string; type: string; code: string | null } }; etag: string | null; headers: Headers };

/** A small client for /manage/v1, speaking from its own client address. */
export function manageClient(baseUrl: string, token: string) {
  const address = randomClientAddress();
  async function call<T = Record<string, unknown>>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer<T>> {
    const res = await fetch(`${baseUrl}/manage/v1${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        'x-forwarded-for': address,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : {}, etag: res.headers.get('etag'), headers: res.headers };
  }
  return {
    get: <T = Record<string, unknown>>(path: string) => call<T>('GET', path),
    post: <T = Record<string, unknown>>(path: string, body: unknown, headers?: Record<string, string>) => call<T>('POST', path, body, headers),
    patch: <T = Record<string, unknown>>(path: string, body: unknown, ifMatch?: string) => call<T>('PATCH', path, body, ifMatch === undefined ? {} : { 'if-match': ifMatch }),
    delete: <T = Record<string, unknown>>(path: string, ifMatch?: string) => call<T>('DELETE', path, undefined, ifMatch === undefined ? {} : { 'if-match': ifMatch }),
  };
}

/** What every management-API test file starts from: a real API, a database handle, a tenant and its client. */
export type ManagementFixture = {
  api: TestApi;
  database: DatabaseHandle;
  tenant: Tenant;
  client: ReturnType<typeof manageClient>;
  close(): Promise<void>;
};

/** `operator`: the fixture's tenant is the operator's own organization (GW_OPERATOR_ORG_ID). */
export async function startManagementFixture(options: { env?: Record<string, string>; operator?: boolean } = {}): Promise<ManagementFixture> {
  const database = testDatabase();
  const tenant = await createTenant(database.db);
  const api = await startTestApi({ env: options.operator ? { ...options.env, GW_OPERATOR_ORG_ID: tenant.orgId } : options.env });
  return {
    api,
    database,
    tenant,
    client: manageClient(api.url, tenant.token),
    async close() {
      await api.close();
      await database.close();
    },
  };
}
