import SwaggerParser from '@apidevtools/swagger-parser';
import type { OpenAPIV3_1 } from 'openapi-types';
import { startTestApi, type TestApi } from '../helpers/harness';

/** Every management operation issue 3 names (spec 4.4); the document must list each. */
const OPERATIONS = [
  'get /organization',
  'get /provider_kinds',
  'get /openapi.json',
  ...['projects', 'gateway_keys', 'provider_connections', 'routes', 'model_prices'].flatMap((t) => [
    `get /${t}`, `post /${t}`, `get /${t}/{id}`, `patch /${t}/{id}`, `delete /${t}/{id}`,
  ]),
  'get /webhook_endpoints', 'post /webhook_endpoints', 'get /webhook_endpoints/{id}', 'delete /webhook_endpoints/{id}',
  'get /org_settings', 'patch /org_settings',
  'get /member_budgets', 'get /member_budgets/{id}', 'patch /member_budgets/{id}',
  'post /gateway_keys/{id}/rotate',
  'post /provider_connections/{id}/credential',
  'post /webhook_endpoints/{id}/rotate_secret',
  // Issue 9: the webhook delivery log.
  'get /webhook_deliveries',
  // Issue 10: end-customer cap rules and their overrides.
  'get /end_user_cap_rules', 'post /end_user_cap_rules', 'get /end_user_cap_rules/{id}', 'patch /end_user_cap_rules/{id}', 'delete /end_user_cap_rules/{id}',
  'get /end_user_cap_rules/{rule}/overrides',
  'get /end_user_cap_rules/{rule}/overrides/{end_user_id}', 'put /end_user_cap_rules/{rule}/overrides/{end_user_id}', 'delete /end_user_cap_rules/{rule}/overrides/{end_user_id}',
  // Issue 12: guardrail policies.
  'get /guardrail_policies', 'post /guardrail_policies', 'get /guardrail_policies/{id}', 'patch /guardrail_policies/{id}', 'delete /guardrail_policies/{id}',
  // Issue 13: usage buckets from the hourly rollup.
  'get /usage',
  // Issue 13: management data operations (budget status, audit log, export).
  'get /budget_status', 'get /audit_events', 'get /export',
  // Issue 13: the request log and traces.
  'get /requests', 'get /requests/{id}', 'get /traces/{id}',
  // Issue 15: the tool gateway's management resources.
  'get /mcp_servers', 'post /mcp_servers', 'get /mcp_servers/{id}', 'patch /mcp_servers/{id}', 'delete /mcp_servers/{id}',
  'post /mcp_servers/{id}/sync', 'post /mcp_servers/{id}/credential', 'post /mcp_servers/disable_all',
  'get /mcp_server_tools', 'get /mcp_server_tools/{id}',
  'post /mcp_server_tools/{id}/approve', 'post /mcp_server_tools/{id}/block', 'post /mcp_server_tools/{id}/unblock',
  'get /mcp_key_grants', 'post /mcp_key_grants', 'get /mcp_key_grants/{id}', 'patch /mcp_key_grants/{id}', 'delete /mcp_key_grants/{id}',
  // Issue 22: alert channels and rules, findings.
  // Issue 23: cost centers, their rules (and their versions) and commitments.
  'get /cost_center_rules/{id}/versions',
  ...['notification_channels', 'notification_rules', 'cost_centers', 'cost_center_rules', 'commitments', 'decision_policies'].flatMap((t) => [
    `get /${t}`, `post /${t}`, `get /${t}/{id}`, `patch /${t}/{id}`, `delete /${t}/{id}`,
  ]),
  'get /findings', 'get /findings/{id}', 'post /findings/{id}/acknowledge',
  // Issue 25: jobs as an operator reads them.
  'get /jobs', 'get /jobs/{id}', 'get /request_stats',
  // Issue 56: batches as an operator reads them.
  'get /batches', 'get /batches/{id}', 'get /batches/{id}/items',
];

describe('GET /manage/v1/openapi.json', () => {
  let api: TestApi;
  let document: OpenAPIV3_1.Document;

  beforeAll(async () => {
    api = await startTestApi();
    const res = await fetch(`${api.url}/manage/v1/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/json');
    document = (await res.json()) as OpenAPIV3_1.Document;
  });
  afterAll(() => api.close());

  it('is a valid OpenAPI 3.1 document', async () => {
    expect(document.openapi).toBe('3.1.0');
    // validate() dereferences in place; give it a copy so later checks see the document as served.
    await expect(SwaggerParser.validate(structuredClone(document) as never)).resolves.toBeDefined();
  });

  it('lists every management operation, and none that is not served', () => {
    const listed = Object.entries(document.paths ?? {}).flatMap(([path, item]) =>
      Object.keys(item ?? {}).filter((m) => ['get', 'post', 'patch', 'put', 'delete'].includes(m)).map((m) => `${m} ${path}`));
    expect(listed.sort()).toEqual([...OPERATIONS].sort());
    expect(document.paths?.['/webhook_endpoints/{id}']?.patch).toBeUndefined();
  });

  it('describes requests from the validating schemas: bounds, required fields, no unknown fields', () => {
    type Schema = { properties: Record<string, { minimum?: number; maximum?: number; maxItems?: number; maxLength?: number; anyOf?: unknown[] }>; required?: string[]; additionalProperties?: unknown };
    const body = (path: string, method: 'post' | 'patch') =>
      ((document.paths![path] as Record<string, OpenAPIV3_1.OperationObject>)[method]!.requestBody as OpenAPIV3_1.RequestBodyObject).content['application/json']!.schema as Schema;
    const connection = body('/provider_connections', 'post');
    expect(connection.properties.timeout_ms).toMatchObject({ minimum: 1000, maximum: 600000 });
    expect(connection.properties.alternate_base_urls).toMatchObject({ maxItems: 5 });
    expect(connection.required).toEqual(expect.arrayContaining(['kind', 'name', 'secret']));
    expect(connection.additionalProperties).toBe(false);
    expect(body('/routes', 'post').properties.max_retries).toMatchObject({ minimum: 0, maximum: 3 });
    expect(body('/routes', 'post').properties.rules).toMatchObject({ maxItems: 20 });
    expect(body('/gateway_keys/{id}/rotate', 'post').properties.overlap_seconds).toMatchObject({ minimum: 0, maximum: 604800 });
    expect(body('/org_settings', 'patch').properties.billing_day_of_month).toMatchObject({ minimum: 1, maximum: 28 });
    expect(body('/projects', 'post').properties.name).toMatchObject({ maxLength: 80 });
    expect(body('/end_user_cap_rules', 'post').properties.amount).toBeDefined();
    expect(body('/end_user_cap_rules', 'post').required).toEqual(['period']);
    expect(body('/end_user_cap_rules', 'post').additionalProperties).toBe(false);
  });

  it('documents If-Match on PATCH and DELETE, Idempotency-Key on POST, and secrets only where they are shown', () => {
    const op = (path: string, method: string) => (document.paths![path] as Record<string, OpenAPIV3_1.OperationObject>)[method]!;
    const header = (o: OpenAPIV3_1.OperationObject, name: string) => (o.parameters as OpenAPIV3_1.ParameterObject[] | undefined)?.find((p) => p.in === 'header' && p.name === name);
    expect(header(op('/routes/{id}', 'patch'), 'if-match')?.required).toBe(true);
    expect(header(op('/routes/{id}', 'delete'), 'if-match')?.required).toBe(true);
    expect(header(op('/gateway_keys/{id}/rotate', 'post'), 'if-match')?.required).toBeFalsy();
    expect(header(op('/routes', 'post'), 'idempotency-key')).toBeDefined();
    expect(header(op('/end_user_cap_rules/{rule}/overrides/{end_user_id}', 'put'), 'if-match')?.required).toBeFalsy();
    expect(header(op('/end_user_cap_rules/{rule}/overrides/{end_user_id}', 'delete'), 'if-match')?.required).toBeFalsy();
    const answerOf = (o: OpenAPIV3_1.OperationObject, status: string) => JSON.stringify((o.responses![status] as OpenAPIV3_1.ResponseObject).content);
    expect(answerOf(op('/gateway_keys', 'post'), '201')).toContain('"secret"');
    expect(answerOf(op('/gateway_keys/{id}', 'get'), '200')).not.toContain('"secret"');
    expect(answerOf(op('/provider_connections', 'post'), '201')).not.toContain('"secret"');
    expect(answerOf(op('/webhook_endpoints/{id}/rotate_secret', 'post'), '200')).toContain('"secret"');
    // A notification channel's chat address is write-only: taken, never answered.
    expect(JSON.stringify(op('/notification_channels', 'post').requestBody)).toContain('"chatapp_url"');
    expect(answerOf(op('/notification_channels/{id}', 'get'), '200')).not.toContain('"chatapp_url"');
  });

  it('documents a list\'s own filters beside its paging (GET /findings: status, type, severity)', () => {
    const params = ((document.paths!['/findings'] as Record<string, OpenAPIV3_1.OperationObject>).get!.parameters as OpenAPIV3_1.ParameterObject[])
      .filter((p) => p.in === 'query').map((p) => p.name);
    expect(params.sort()).toEqual(['after', 'limit', 'severity', 'status', 'type']);
  });
});

describe('GET /v1/openapi.json', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi();
  });
  afterAll(() => api.close());

  it('is a valid OpenAPI 3.1 document of every model endpoint, readable without a key', async () => {
    const res = await fetch(`${api.url}/v1/openapi.json`);
    expect(res.status).toBe(200);
    const document = (await res.json()) as OpenAPIV3_1.Document;
    await SwaggerParser.validate(structuredClone(document) as never);
    const operations = Object.entries(document.paths ?? {}).flatMap(([p, item]) => Object.keys(item ?? {}).map((m) => `${m} ${p}`));
    expect(operations).toEqual(expect.arrayContaining(['post /chat/completions', 'post /messages', 'post /messages/count_tokens', 'post /responses', 'get /responses/{id}', 'delete /responses/{id}', 'post /embeddings', 'get /models', 'get /openapi.json',
      // Issue 56: OpenAI's Files and Batch APIs.
      'post /files', 'get /files', 'get /files/{id}', 'delete /files/{id}', 'get /files/{id}/content',
      'post /batches', 'get /batches', 'get /batches/{id}', 'post /batches/{id}/cancel',
      // And Anthropic's Message Batches.
      'post /messages/batches', 'get /messages/batches', 'get /messages/batches/{id}', 'delete /messages/batches/{id}',
      'post /messages/batches/{id}/cancel', 'get /messages/batches/{id}/results']));
    const messages = document.paths!['/messages']!.post!.requestBody as OpenAPIV3_1.RequestBodyObject;
    expect(JSON.stringify(messages.content['application/json']!.schema)).toContain('max_tokens');
  });
});
