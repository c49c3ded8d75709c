import Redis from 'ioredis';
import { consultCache } from '../../api/gateway/cache-step';
import type { GatewayContext } from '../../api/context';
import { GatewayError } from '../../core/errors';
import type { ChatBody } from '../../core/providers/types';
import { ChoiceAssembler, replayChunks, type CachedAnswer } from '../../core/response-cache/answer';
import { responseCacheKey } from '../../core/response-cache/key';
import { resolveCachePolicy } from '../../core/response-cache/policy';
import { COMPRESS_ABOVE_BYTES, createResponseCacheStore, decodeAnswer, encodeAnswer } from '../../core/response-cache/store';

const body = (extra: Record<string, unknown> = {}) => ({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }], ...extra }) as ChatBody;

describe('response cache: policy', () => {
  const on = { enabled: true, default_ttl_seconds: 3600 };

  it('is off when the organization switched it off, whatever the request asks', () => {
    expect(resolveCachePolicy({ enabled: false, default_ttl_seconds: 3600 }, 'business', { mode: 'default' })).toEqual({ state: 'off' });
  });

  it('maps each mode to read and write', () => {
    const modes = (['default', 'bypass', 'refresh', 'read_only'] as const).map((mode) => {
      const p = resolveCachePolicy(on, 'business', { mode });
      return p.state === 'on' ? [mode, p.read, p.write] : null;
    });
    expect(modes).toEqual([['default', true, true], ['bypass', false, false], ['refresh', false, true], ['read_only', true, false]]);
  });

  it('holds TTLs to the plan: trial 1 day, team 7, business 30; the default is clamped', () => {
    expect(() => resolveCachePolicy(on, 'trial', { ttlSeconds: 86_401 })).toThrow(expect.objectContaining({ code: 'cache_ttl_too_long' }));
    expect(() => resolveCachePolicy(on, 'team', { ttlSeconds: 7 * 86_400 + 1 })).toThrow(GatewayError);
    expect(resolveCachePolicy(on, 'team', { ttlSeconds: 7 * 86_400 })).toMatchObject({ ttlSeconds: 604_800 });
    expect(resolveCachePolicy({ enabled: true, default_ttl_seconds: 2_592_000 }, 'trial', {})).toMatchObject({ ttlSeconds: 86_400, namespace: 'default' });
  });
});

describe('response cache: key', () => {
  it('ignores stream, stream_options and key order; never holds the payload', () => {
    const a = responseCacheKey('org_1', 'ns', body({ temperature: 0.2, stream: true, stream_options: { include_usage: true } }) as never);
    const b = responseCacheKey('org_1', 'ns', { temperature: 0.2, messages: [{ content: 'hi', role: 'user' }], model: 'openai/gpt-4o' });
    expect(a).toBe(b);
    expect(a).toMatch(/^rc:\{org_1\}:ns:[0-9a-f]{64}$/);
    expect(a).not.toContain('hi');
  });

  it('differs by organization, namespace, model, messages and parameters', () => {
    const base = responseCacheKey('org_1', 'ns', body() as never);
    expect(responseCacheKey('org_2', 'ns', body() as never)).not.toBe(base);
    expect(responseCacheKey('org_1', 'other', body() as never)).not.toBe(base);
    expect(responseCacheKey('org_1', 'ns', body({ model: 'openai/gpt-4o-mini' }) as never)).not.toBe(base);
    expect(responseCacheKey('org_1', 'ns', body({ temperature: 1 }) as never)).not.toBe(base);
    expect(responseCacheKey('org_1', 'ns', body({ tools: [{ type: 'function', function: { name: 'f' } }] }) as never)).not.toBe(base);
    expect(responseCacheKey('org_1', 'ns', body({ response_format: { type: 'json_object' } }) as never)).not.toBe(base);
  });
});

describe('response cache: answers', () => {
  it('assembles streamed chunks, text and tool calls, and replays them', () => {
    const a = new ChoiceAssembler();
    a.add([{ index: 0, delta: { role: 'assistant', content: 'Hel' }, finish_reason: null }]);
    a.add([{ index: 0, delta: { content: 'lo' }, finish_reason: null }]);
    a.add([{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get', arguments: '{"a":' } }] }, finish_reason: null }]);
    a.add([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '1}' } }] }, finish_reason: null }]);
    expect(a.choices()).toBeNull();
    a.add([{ index: 0, delta: {}, finish_reason: 'tool_calls' }]);
    const choices = a.choices()!;
    expect(choices).toEqual([{ index: 0, message: { role: 'assistant', content: 'Hello', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get', arguments: '{"a":1}' } }] }, finish_reason: 'tool_calls' }]);
    const again = new ChoiceAssembler();
    for (const chunk of replayChunks(choices)) again.add(chunk);
    expect(again.choices()).toEqual(choices);
  });

  it('compresses values above a few KB and reads both forms back', async () => {
    const answer = (text: string): CachedAnswer => ({
      requestId: 'req_1', storedAt: 1, model: 'm', provider: 'openai', connection: 'conn_1', route: 'primary',
      choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }], usage: null,
    });
    const small = await encodeAnswer(answer('short'));
    expect(String.fromCharCode(small[0]!)).toBe('j');
    const big = await encodeAnswer(answer('x'.repeat(COMPRESS_ABOVE_BYTES * 4)));
    expect(String.fromCharCode(big[0]!)).toBe('z');
    expect(big.length).toBeLessThan(COMPRESS_ABOVE_BYTES);
    expect(await decodeAnswer(small)).toEqual(answer('short'));
    expect(await decodeAnswer(big)).toEqual(answer('x'.repeat(COMPRESS_ABOVE_BYTES * 4)));
  });
});

describe('response cache: Redis unreachable', () => {
  // A real client that cannot connect (nothing listens on port 1).
  const redis = new Redis('redis://127.0.0.1:1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  afterAll(() => redis.disconnect());
  const store = createResponseCacheStore(redis);
  const headers: Record<string, string> = {};
  const ctx = { state: {}, set: (k: string, v: string) => void (headers[k] = v) } as unknown as GatewayContext;
  const on = { enabled: true, default_ttl_seconds: 3600 };

  it('serves uncached (BYPASS) unless the request demanded read_only: then 400 response_cache_unavailable', async () => {
    const outcome = await consultCache(ctx, store, 'org_1', resolveCachePolicy(on, 'business', {}), body(), true, () => true);
    expect(outcome).toEqual({ status: 'bypass', writeTo: null, hit: null });
    expect(headers['X-GW-Cache']).toBe('BYPASS');
    await expect(consultCache(ctx, store, 'org_1', resolveCachePolicy(on, 'business', { mode: 'read_only' }), body(), true, () => true))
      .rejects.toMatchObject({ code: 'response_cache_unavailable', status: 400 });
  });
});
