import { refusalFor, serverInScope } from '../../api/gateway/mcp';
import { checkArguments, checkResult, resultTexts, stringLeaves, ToolRefusal, TOOL_REFUSALS } from '../../core/mcp/agent-call';

const definition = {
  name: 'search',
  inputSchema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { query: { type: 'string', minLength: 1 }, limit: { type: 'integer' } }, required: ['query'], additionalProperties: false },
};
const sha = 'a'.repeat(64);
const codeOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return (err as ToolRefusal).code;
  }
  return null;
};

describe('agent tool calls (pure parts)', () => {
  it('answers refusals as isError tool results with {type, code, message}', () => {
    const result = new ToolRefusal('upstream_timeout', 'too slow').toResult();
    expect(result).toMatchObject({ isError: true, structuredContent: { type: 'request_timeout', code: 'upstream_timeout', message: 'too slow' } });
    expect(Object.entries(TOOL_REFUSALS).map(([code, r]) => `${code}:${r.type}`)).toEqual([
      'tool_not_allowed:permission_denied', 'tool_not_approved:permission_denied', 'tool_definition_changed:permission_denied',
      'invalid_tool_arguments:invalid_request_error', 'tool_result_too_large:upstream_error', 'tool_result_invalid:upstream_error',
      'upstream_unavailable:upstream_error', 'upstream_rejected:upstream_error', 'upstream_timeout:request_timeout',
      'guardrail_blocked:permission_denied', 'guardrail_unavailable:permission_denied',
    ]);
  });

  it('validates arguments against the approved input schema (ajv, dialect marker ignored)', () => {
    expect(codeOf(() => checkArguments(definition, sha, { query: 'x', limit: 3 }))).toBeNull();
    expect(codeOf(() => checkArguments(definition, sha, { query: '' }))).toBe('invalid_tool_arguments');
    expect(codeOf(() => checkArguments(definition, sha, { query: 'x', extra: 1 }))).toBe('invalid_tool_arguments');
    expect(codeOf(() => checkArguments(definition, sha, {}))).toBe('invalid_tool_arguments');
  });

  it('checks results: size, shape, and the approved output schema', () => {
    const limits = { maxResultBytes: 100 };
    expect(checkResult({ content: [{ type: 'text', text: 'ok' }] }, limits, definition, sha).content).toHaveLength(1);
    expect(codeOf(() => checkResult({ content: [{ type: 'text', text: 'x'.repeat(200) }] }, limits, definition, sha))).toBe('tool_result_too_large');
    expect(codeOf(() => checkResult({ content: 'nope' }, limits, definition, sha))).toBe('tool_result_invalid');
    const typed = { ...definition, outputSchema: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] } };
    const sha2 = 'b'.repeat(64);
    expect(codeOf(() => checkResult({ content: [], structuredContent: { n: 1 } }, limits, typed, sha2))).toBeNull();
    expect(codeOf(() => checkResult({ content: [], structuredContent: { n: 'one' } }, limits, typed, sha2))).toBe('tool_result_invalid');
    expect(codeOf(() => checkResult({ content: [] }, limits, typed, sha2))).toBe('tool_result_invalid');
    // A tool's own error result needs no structured content.
    expect(codeOf(() => checkResult({ content: [{ type: 'text', text: 'failed' }], isError: true }, limits, typed, sha2))).toBeNull();
  });

  it('reads and rebuilds the string leaves guardrails scan', () => {
    const leaves = stringLeaves({ a: 'one', b: [1, 'two', { c: 'three' }], d: null });
    expect(leaves.texts).toEqual(['one', 'two', 'three']);
    expect(leaves.rebuild(['1', '2', '3'])).toEqual({ a: '1', b: [1, '2', { c: '3' }], d: null });
    const texts = resultTexts({ content: [{ type: 'image', data: 'AA', mimeType: 'image/png' }, { type: 'text', text: 'hi' }], structuredContent: { s: 'there' } });
    expect(texts.texts).toEqual(['hi', 'there']);
    expect(texts.rebuild(['HI', 'THERE'])).toEqual({ content: [{ type: 'image', data: 'AA', mimeType: 'image/png' }, { type: 'text', text: 'HI' }], structuredContent: { s: 'THERE' } });
  });

  it('decides refusals in order: selection, approval, definition change, read class', () => {
    const tool = { state: 'approved' as const, upstreamName: 'w', accessClass: 'write' as const, listed: true, approvedDefinition: { name: 'w' }, approvedSha256: sha };
    expect(refusalFor({ mode: 'all', tools: [] }, tool, 'x_w')).toBeNull();
    expect(refusalFor({ mode: 'read', tools: [] }, tool, 'x_w')?.code).toBe('tool_not_allowed');
    expect(refusalFor({ mode: 'selected', tools: ['other'] }, tool, 'x_w')?.code).toBe('tool_not_allowed');
    expect(refusalFor({ mode: 'all', tools: [] }, { ...tool, state: 'blocked' }, 'x_w')?.code).toBe('tool_not_approved');
    expect(refusalFor({ mode: 'read', tools: [] }, { ...tool, state: 'pending', accessClass: null, approvedDefinition: null, approvedSha256: null }, 'x_w')?.code).toBe('tool_not_approved');
    expect(refusalFor({ mode: 'all', tools: [] }, { ...tool, state: 'changed' }, 'x_w')?.code).toBe('tool_definition_changed');
    expect(refusalFor({ mode: 'all', tools: [] }, { ...tool, listed: false }, 'x_w')?.code).toBe('tool_not_allowed');
    expect(refusalFor({ mode: 'all', tools: [] }, null, 'x_w')?.code).toBe('tool_not_allowed');
  });

  it('scopes servers by project and environment (empty lists mean all)', () => {
    const key = { projectId: 'p1', environment: null };
    expect(serverInScope({ projectIds: [], environments: [] }, key)).toBe(true);
    expect(serverInScope({ projectIds: ['p2'], environments: [] }, key)).toBe(false);
    expect(serverInScope({ projectIds: [], environments: ['production'] }, key)).toBe(false);
    expect(serverInScope({ projectIds: ['p1'], environments: ['production'] }, { projectId: 'p1', environment: 'production' })).toBe(true);
  });
});
