import { createGuardedDispatcher } from '../../core/net/guarded-dispatcher';
import { discoverTools } from '../../core/mcp/client';
import { canonicalJson, definitionSha256, toolDefinition } from '../../core/mcp/canonical';
import { grantAllows } from '../../core/mcp/grants';
import { serverReachableBy } from '../../core/mcp/servers';
import { exposedNameFor } from '../../core/mcp/tools';
import { startTestMcpServer, type TestMcpServer } from '../helpers/mcp-servers';

describe('core/mcp client and hash', () => {
  const open = createGuardedDispatcher({ allowPrivateNetwork: true });
  const strict = createGuardedDispatcher({ allowPrivateNetwork: false });
  let streamable: TestMcpServer;
  let sse: TestMcpServer;

  beforeAll(async () => {
    streamable = await startTestMcpServer('streamable_http', [{ name: 'search', description: 'Search things', readOnly: true }], { requiredHeaders: { 'x-api-key': 'k1' } });
    sse = await startTestMcpServer('http_sse', [{ name: 'send', description: 'Send a message' }]);
  });
  afterAll(async () => {
    await streamable.close();
    await sse.close();
    await open.close();
    await strict.close();
  });

  it('lists over streamable HTTP with the credential headers, and says so', async () => {
    const listing = await discoverTools({ url: streamable.url, headers: { 'x-api-key': 'k1' }, timeoutMs: 5000 }, { dispatcher: open });
    expect(listing.protocolEra).toBe('streamable_http');
    expect(listing.tools.map((t) => t.name)).toEqual(['search']);
    expect(listing.tools[0]!.annotations).toMatchObject({ readOnlyHint: true });
  });

  it('falls back to the older HTTP+SSE transport', async () => {
    const listing = await discoverTools({ url: sse.url, headers: {}, timeoutMs: 5000 }, { dispatcher: open });
    expect(listing.protocolEra).toBe('http_sse');
    expect(listing.tools.map((t) => t.name)).toEqual(['send']);
  });

  it('fails without the credential, and through the guard when private addresses are refused', async () => {
    await expect(discoverTools({ url: streamable.url, headers: {}, timeoutMs: 5000 }, { dispatcher: open })).rejects.toThrow(/streamable HTTP: .*HTTP\+SSE: /);
    await expect(discoverTools({ url: sse.url, headers: {}, timeoutMs: 5000 }, { dispatcher: strict })).rejects.toThrow(/not a public address|EPRIVATE|fetch failed/);
  });

  it('hashes the RFC 8785 canonical JSON of the definition without _meta', () => {
    const a = toolDefinition({ name: 't', description: 'd', inputSchema: { type: 'object', properties: { b: { type: 'string' }, a: { type: 'number' } } }, _meta: { x: 1 } });
    const b = toolDefinition({ inputSchema: { properties: { a: { type: 'number' }, b: { type: 'string' } }, type: 'object' }, description: 'd', name: 't' });
    expect(canonicalJson(a)).toBe('{"description":"d","inputSchema":{"properties":{"a":{"type":"number"},"b":{"type":"string"}},"type":"object"},"name":"t"}');
    expect(definitionSha256(a)).toBe(definitionSha256(b));
    expect(definitionSha256(a)).toMatch(/^[0-9a-f]{64}$/);
    expect(definitionSha256({ ...a, description: 'e' })).not.toBe(definitionSha256(a));
  });

  it('exposes a tool as <slug>_<name>, folded and cut to 64 characters', () => {
    expect(exposedNameFor('gh', 'search')).toBe('gh_search');
    expect(exposedNameFor('gh', 'repo.search/v2')).toBe('gh_repo_search_v2');
    expect(exposedNameFor('gh', 'x'.repeat(100))).toHaveLength(64);
  });

  it('decides a grant\'s tools by mode, and a key\'s reach by project and environment', () => {
    const read = { upstreamName: 'search', accessClass: 'read' as const };
    const write = { upstreamName: 'send', accessClass: 'write' as const };
    expect([grantAllows({ mode: 'all', tools: [] }, write), grantAllows({ mode: 'read', tools: [] }, read), grantAllows({ mode: 'read', tools: [] }, write)]).toEqual([true, true, false]);
    expect([grantAllows({ mode: 'selected', tools: ['send'] }, write), grantAllows({ mode: 'selected', tools: ['send'] }, read)]).toEqual([true, false]);
    const open = { status: 'active' as const, projectIds: [], environments: [] };
    expect(serverReachableBy(open, { projectId: 'p1', environment: null })).toBe(true);
    expect(serverReachableBy({ ...open, status: 'disabled' }, { projectId: 'p1', environment: null })).toBe(false);
    expect(serverReachableBy({ ...open, projectIds: ['p2'] }, { projectId: 'p1', environment: null })).toBe(false);
    expect(serverReachableBy({ ...open, environments: ['production'] }, { projectId: 'p1', environment: null })).toBe(false);
    expect(serverReachableBy({ ...open, environments: ['production'] }, { projectId: 'p1', environment: 'production' })).toBe(true);
  });
});
