import { chatBodyOf, messagesRequestSchema, nativeBodyOf, nativeOnlyFields } from '../../api/gateway/protocols/anthropic-messages';
import { loadModelCatalog, type ModelCatalog } from '../../core/catalog/model-catalog';
import { prepareBody } from '../../core/chat/prepare';
import { ADAPTERS } from '../../core/providers/adapters';
import type { ProviderKind } from '../../core/providers/kinds';
import { NATIVE_REQUEST, type ChatBody } from '../../core/providers/types';

/**
 * Today's Messages request on every wire (issue 53), as fixtures: a system message between turns
 * stays one, `output_config.effort` is a reasoning effort only for a candidate whose wire and
 * model take one, and a field only a beta turns on reaches Anthropic only with that beta.
 */
let catalog: ModelCatalog;
beforeAll(async () => {
  catalog = await loadModelCatalog();
});

const request = (extra: Record<string, unknown> = {}) => messagesRequestSchema.parse({
  model: 'x/y', max_tokens: 100,
  messages: [{ role: 'user', content: 'hi' }, { role: 'system', content: [{ type: 'text', text: 'Be brief.' }] }],
  output_config: { effort: 'high' },
  ...extra,
});

/** The Messages request translated as the route does, with its native body beside it. */
function translated(extra: Record<string, unknown> = {}, betas?: string[]): ChatBody {
  const parsed = request(extra);
  const body = chatBodyOf(parsed);
  body[NATIVE_REQUEST] = { wire: 'anthropic-messages', body: nativeBodyOf(parsed), ...(betas && { betas }) };
  return body;
}

function through(kind: ProviderKind, model: string, body: ChatBody, config: Record<string, unknown> = {}) {
  const adapter = ADAPTERS[kind];
  const prepared = prepareBody(body, kind, model, adapter, catalog, new Set(), false, config);
  return { dropped: prepared.dropped, sent: adapter.buildRequest(prepared.body, { model, stream: false, defaultMaxTokens: 4096, config }).body as Record<string, unknown> };
}

describe('a Messages request on each wire', () => {
  it('keeps a system message between turns a system message on the chat wire', () => {
    expect(translated().messages).toEqual([{ role: 'user', content: 'hi' }, { role: 'system', content: 'Be brief.' }]);
  });

  it('sends the effort to an OpenAI model that reasons, under the chat wire\'s name', () => {
    for (const kind of ['openai', 'azure_openai'] as const) {
      expect(through(kind, 'o3-mini', translated())).toMatchObject({ dropped: [], sent: { reasoning_effort: 'high' } });
    }
  });

  it('leaves it out, named under the client\'s own name, where the wire or the model takes none', () => {
    for (const [kind, model] of [['openai', 'gpt-4o-mini'], ['groq', 'openai/gpt-oss-120b'], ['google', 'gemini-2.5-pro']] as const) {
      const { dropped, sent } = through(kind, model, translated());
      expect(dropped).toEqual(['output_config.effort']);
      expect(JSON.stringify(sent)).not.toContain('reasoning_effort');
    }
  });

  it('sends Anthropic the effort in its own words when it takes the request as it came, and names nothing', () => {
    const { dropped, sent } = through('anthropic', 'claude-3-5-haiku-latest', translated());
    expect(dropped).toEqual([]);
    expect(sent).toMatchObject({ output_config: { effort: 'high' }, messages: [{ role: 'user' }, { role: 'system' }] });
    expect(sent).not.toHaveProperty('reasoning_effort');
  });

  it('forwards a chat client\'s own reasoning_effort as before: only the translation is conditional', () => {
    const { dropped, sent } = through('openai', 'gpt-4o-mini', { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], reasoning_effort: 'low' });
    expect(dropped).toEqual([]);
    expect(sent.reasoning_effort).toBe('low');
  });

  it('sends context_management to Anthropic only with the beta that turns it on', () => {
    const context = { context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] } };
    const beta = 'context-management-2025-06-27';
    const without = through('anthropic', 'claude-3-5-haiku-latest', translated(context, [beta]));
    expect(without.dropped).toEqual(['context_management']);
    expect(without.sent).not.toHaveProperty('context_management');
    // The connection allows it, but the client did not ask for the beta: Anthropic would refuse the field.
    expect(through('anthropic', 'claude-3-5-haiku-latest', translated(context), { anthropic_betas: [beta] }).dropped).toEqual(['context_management']);
    const allowed = through('anthropic', 'claude-3-5-haiku-latest', translated(context, [beta]), { anthropic_betas: [beta] });
    expect(allowed.dropped).toEqual([]);
    expect(allowed.sent).toMatchObject(context);
  });

  it('names thinking of any kind and context_management as fields only Anthropic\'s wire carries', () => {
    expect(nativeOnlyFields(request({ thinking: { type: 'adaptive' }, context_management: { edits: [] } }))).toEqual(['thinking', 'context_management']);
    expect(nativeOnlyFields(request({ thinking: { type: 'disabled' } }))).toEqual([]);
  });

  it('names every other field the translation does not read, and output_config parts other than effort and format', () => {
    const mcp = [{ type: 'url', url: 'https://mcp.example.com/sse', name: 'docs' }];
    expect(nativeOnlyFields(request({ mcp_servers: mcp, container: 'container_1', service_tier: 'auto', some_new_field: 1 })))
      .toEqual(['mcp_servers', 'container', 'service_tier', 'some_new_field']);
    expect(nativeOnlyFields(request({ output_config: { effort: 'high', format: { type: 'json_schema', schema: { type: 'object' } }, task_budget: 100 } })))
      .toEqual(['output_config.task_budget']);
    // What the translation reads, and a field left null, are not named.
    expect(nativeOnlyFields(request({ temperature: 0.5, top_k: 3, stop_sequences: ['x'], metadata: { user_id: 'u' }, stream: true, container: null }))).toEqual([]);
  });
});
