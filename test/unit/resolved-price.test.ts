import { calcPrice, findProvider, type Provider } from '@pydantic/genai-prices';
import { loadModelCatalog, PRICE_PROVIDER_IDS, type CatalogOptions, type ModelCatalog } from '../../core/catalog/model-catalog';
import { estimateCost, hasPrice } from '../../core/pricing/cost';
import { resolvedPrice } from '../../core/pricing/resolved-price';
import type { ProviderKind } from '../../core/providers/kinds';
import { NATIVE_REQUEST, type ChatBody } from '../../core/providers/types';
import type { Candidate } from '../../core/routing/candidates';
import type { PriceEntry } from '../../core/routing/org-config';
import { estimatePromptTokens, worstCaseCost } from '../../core/spend/worst-case';

/** A catalog whose price searches (calcPrice by provider id) and library calls are counted. */
async function countingCatalog(options: Omit<CatalogOptions, 'calcPrice'> & { data?: Provider } = {}) {
  const counts = { searches: 0, library: 0 };
  const catalog = await loadModelCatalog({
    now: options.now,
    calcPrice: (usage, model, opts) => {
      if (opts?.providerId) {
        counts.searches += 1;
        // A test's own price data stands in for the library's, looked up the same way.
        if (options.data) return calcPrice(usage, model, { provider: options.data, timestamp: opts.timestamp });
      } else {
        counts.library += 1;
      }
      return calcPrice(usage, model, opts);
    },
  });
  return { catalog, counts };
}

const usage = (prompt: number, completion: number, cached = 0) => ({
  prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: cached },
});

const candidate = (kind: ProviderKind, upstreamModel: string): Candidate =>
  ({ connection: { kind } as Candidate['connection'], upstreamModel, modelId: `${kind}/${upstreamModel}`, fallback: false });

const body = { model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'Hello there.' }], max_tokens: 1000 } as ChatBody;

const rate = (model: string, provider: string | null, input: number, output: number): PriceEntry =>
  ({ model, provider, inputPerMillion: input, outputPerMillion: output, cachedInputPerMillion: null, unit: null });

describe('list prices resolved once (issue 21)', () => {
  it('gives what calcPrice gives, for every model genai-prices lists under each of our kinds', async () => {
    const at = Date.now();
    const catalog = await loadModelCatalog({ now: () => at });
    // Small, cached, all-cached, past the 128k and 200k tiers, millions, and more cached than input.
    const usages: Array<[input: number, cached: number, output: number]> = [
      [1_000, 0, 500], [1_234, 200, 321], [100, 100, 0], [0, 0, 0],
      [150_000, 20_000, 8_000], [300_000, 50_000, 100_000], [2_000_000, 1_000_000, 1_000_000], [10, 20, 5],
      [128_000, 0, 1_000], [200_000, 1_000, 1_000], [200_001, 1_000, 1_000],
    ];
    let compared = 0;
    const methods = { closed_form: 0, library: 0 };
    for (const [kind, providerId] of Object.entries(PRICE_PROVIDER_IDS) as Array<[ProviderKind, string]>) {
      const provider = findProvider({ providerId })!;
      // A kind's own models, and those it falls back to (azure serves openai's, for one).
      const fallbacks = (provider.fallback_model_providers ?? []).map((id) => findProvider({ providerId: id })!);
      for (const model of [provider, ...fallbacks].flatMap((p) => p.models)) {
        const list = catalog.listPriceOf(kind, model.id);
        const reference = (input: number, cached: number, output: number) =>
          calcPrice({ input_tokens: input, cache_read_tokens: cached || undefined, output_tokens: output }, model.id, { providerId, timestamp: new Date(at) });
        if (!list) {
          expect(reference(1, 0, 1)).toBeNull();
          continue;
        }
        methods[list.method] += 1;
        for (const [input, cached, output] of usages) {
          const outcome = (f: () => number | undefined) => {
            try {
              return f();
            } catch (error) {
              return (error as Error).message;
            }
          };
          const expected = outcome(() => reference(input, cached, output)!.total_price);
          const actual = outcome(() => list.cost(input, cached, output));
          if (typeof expected === 'number' && typeof actual === 'number') {
            expect({ model: `${kind}/${model.id}`, input, cached, output, diff: Math.abs(actual - expected) <= 1e-12 * Math.abs(expected) }).toEqual({ model: `${kind}/${model.id}`, input, cached, output, diff: true });
          } else {
            expect({ model: `${kind}/${model.id}`, actual }).toEqual({ model: `${kind}/${model.id}`, actual: expected });
          }
          compared += 1;
        }
      }
    }
    expect(compared).toBeGreaterThan(5_000);
    // The closed form is the common case; the library is the exception (time-of-day, per-request, audio prices).
    expect(methods.closed_form).toBeGreaterThan(10 * methods.library);
  });

  it('searches the price data once per model; a second request neither searches nor calls the library', async () => {
    const { catalog, counts } = await countingCatalog();
    const q = { kind: 'openai' as const, upstreamModel: 'gpt-4o-mini', modelId: 'openai/gpt-4o-mini', prices: [] as PriceEntry[], catalog };
    const first = estimateCost({ ...q, usage: usage(1_000_000, 1_000_000) });
    expect(first).toEqual({ cost: 0.75, source: 'list' });
    expect(counts.searches).toBe(1);
    const searches = counts.searches;
    const library = counts.library;
    expect(estimateCost({ ...q, usage: usage(2_000, 300, 1_000) })).toEqual({ cost: 0.000405, source: 'list' });
    expect(catalog.knows('openai', 'gpt-4o-mini')).toBe(true);
    expect(hasPrice(q)).toBe(true);
    expect(catalog.listPrice('openai', 'gpt-4o-mini', { inputTokens: 1, cachedInputTokens: 0, outputTokens: 1 })).toBeGreaterThan(0);
    expect(counts).toEqual({ searches, library });
    // An unpriced name is remembered as unpriced too.
    expect(catalog.knows('openai', 'no-such-model-xyz')).toBe(false);
    expect(catalog.knows('openai', 'no-such-model-xyz')).toBe(false);
    expect(counts.searches).toBe(searches + 1);
  });

  it('uses a changed custom rate at once: a new OrgConfig brings a new prices array', async () => {
    const { catalog } = await countingCatalog();
    const q = { kind: 'openai' as const, upstreamModel: 'gpt-4o-mini', modelId: 'openai/gpt-4o-mini', catalog };
    const before = [rate('gpt-4o-mini', null, 1, 2)];
    expect(estimateCost({ ...q, prices: before, usage: usage(1_000_000, 1_000_000) })).toEqual({ cost: 3, source: 'custom' });
    const after = [rate('gpt-4o-mini', null, 1, 2), rate('openai/gpt-4o-mini', 'openai', 5, 7)];
    expect(estimateCost({ ...q, prices: after, usage: usage(1_000_000, 1_000_000) })).toEqual({ cost: 12, source: 'custom_provider' });
    const removed: PriceEntry[] = [];
    expect(estimateCost({ ...q, prices: removed, usage: usage(1_000_000, 1_000_000) })).toEqual({ cost: 0.75, source: 'list' });
    // A rate with neither input nor output set prices nothing: the next source does.
    expect(estimateCost({ ...q, prices: [{ ...rate('gpt-4o-mini', 'openai', 0, 0), inputPerMillion: null, outputPerMillion: null }], usage: usage(1_000_000, 1_000_000) }))
      .toEqual({ cost: 0.75, source: 'list' });
  });

  it('prices the worst case and the settled cost from one resolved entry', async () => {
    const { catalog, counts } = await countingCatalog();
    const config = { prices: [rate('other-model', null, 1, 1)], unpricedBudgetPolicy: 'block' as const };
    const c = candidate('openrouter', 'openai/gpt-4o-mini');
    const worst = worstCaseCost([c], body, config, catalog);
    const entry = resolvedPrice({ kind: 'openrouter', upstreamModel: c.upstreamModel, modelId: c.modelId, prices: config.prices, catalog });
    expect(entry.source).toBe('list');
    const settled = estimateCost({ kind: 'openrouter', upstreamModel: c.upstreamModel, modelId: c.modelId, prices: config.prices, catalog, usage: usage(10, 1000) });
    expect(resolvedPrice({ kind: 'openrouter', upstreamModel: c.upstreamModel, modelId: c.modelId, prices: config.prices, catalog })).toBe(entry);
    expect(counts.searches).toBe(1);
    expect(worst).toBe(estimateCost({ kind: 'openrouter', upstreamModel: c.upstreamModel, modelId: c.modelId, prices: config.prices, catalog, usage: usage(estimatePromptTokens(body), 1000) })!.cost);
    expect(settled).toEqual({ cost: Math.round(entry.source === 'list' ? entry.list.cost(10, 0, 1000) * 1e9 : NaN) / 1e9, source: 'list' });
  });

  it('holds a Messages request that marks cache breakpoints at the cache-write rate: 1.25x the input for 5 minutes, 2x for an hour (issue 54)', async () => {
    const { catalog } = await countingCatalog();
    const config = { prices: [] as PriceEntry[], unpricedBudgetPolicy: 'block' as const };
    const c = candidate('anthropic', 'claude-3-5-haiku-latest');
    const messages = (cacheControl?: Record<string, unknown>) => [{ role: 'user', content: [{ type: 'text', text: 'A long system of record.', ...(cacheControl && { cache_control: cacheControl }) }] }];
    const messagesBody = (cacheControl?: Record<string, unknown>) => ({
      model: 'anthropic/claude-3-5-haiku-latest', messages: messages(), max_tokens: 1000,
      [NATIVE_REQUEST]: { wire: 'anthropic-messages', body: { model: 'claude-3-5-haiku-latest', max_tokens: 1000, messages: messages(cacheControl) } },
    }) as unknown as ChatBody;
    const prompt = estimatePromptTokens(messagesBody());
    const plain = worstCaseCost([c], messagesBody(), config, catalog);
    // claude-3-5-haiku: $0.80 a million in, $1.00 written for 5 minutes, $1.60 for an hour.
    expect(worstCaseCost([c], messagesBody({ type: 'ephemeral' }), config, catalog) - plain).toBeCloseTo((prompt * (1 - 0.8)) / 1e6, 12);
    expect(worstCaseCost([c], messagesBody({ type: 'ephemeral', ttl: '1h' }), config, catalog) - plain).toBeCloseTo((prompt * (1.6 - 0.8)) / 1e6, 12);
  });

  it('holds an image inside a native tool_result, which the translation leaves out, as any image (issue 54)', async () => {
    const { catalog } = await countingCatalog();
    const config = { prices: [] as PriceEntry[], unpricedBudgetPolicy: 'block' as const };
    const c = candidate('anthropic', 'claude-3-5-haiku-latest');
    const result = (withImage: boolean) => [{ type: 'text', text: 'the screenshot' }, ...(withImage ? [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0K' } }] : [])];
    const messagesBody = (withImage: boolean) => ({
      model: 'anthropic/claude-3-5-haiku-latest', messages: [{ role: 'tool', tool_call_id: 't1', content: 'the screenshot' }], max_tokens: 1000,
      [NATIVE_REQUEST]: { wire: 'anthropic-messages', body: { model: 'claude-3-5-haiku-latest', max_tokens: 1000, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: result(withImage) }] }] } },
    }) as unknown as ChatBody;
    // The translation is the same either way; the image is held at 8,000 tokens of $0.80 a million.
    expect(worstCaseCost([c], messagesBody(true), config, catalog) - worstCaseCost([c], messagesBody(false), config, catalog)).toBeCloseTo((8000 * 0.8) / 1e6, 12);
  });

  it('resolves a dated price again once its start date passes', async () => {
    const starts = Date.parse('2031-01-01T00:00:00Z');
    const data: Provider = {
      id: 'openai', name: 'Test', api_pattern: 'x',
      models: [{
        id: 'dated-model', match: { equals: 'dated-model' },
        prices: [
          { prices: { input_mtok: 1, output_mtok: 2 } },
          { constraint: { type: 'start_date', start_date: '2031-01-01' }, prices: { input_mtok: 3, output_mtok: 4 } },
        ],
      }],
    };
    let now = starts - 60_000;
    const { catalog, counts } = await countingCatalog({ now: () => now, data });
    const q = { kind: 'openai' as const, upstreamModel: 'dated-model', modelId: 'openai/dated-model', prices: [] as PriceEntry[], catalog };
    expect(estimateCost({ ...q, usage: usage(1_000_000, 1_000_000) })).toEqual({ cost: 3, source: 'list' });
    expect(catalog.listPriceOf('openai', 'dated-model')).toMatchObject({ method: 'closed_form', validUntil: starts });
    now = starts - 1;
    expect(estimateCost({ ...q, usage: usage(1_000_000, 1_000_000) })).toEqual({ cost: 3, source: 'list' });
    expect(counts.searches).toBe(1);
    now = starts;
    expect(estimateCost({ ...q, usage: usage(1_000_000, 1_000_000) })).toEqual({ cost: 7, source: 'list' });
    expect(worstCaseCost([candidate('openai', 'dated-model')], body, { prices: q.prices, unpricedBudgetPolicy: 'block' }, catalog)).toBeGreaterThan(0);
    expect(counts.searches).toBe(2);
    expect(catalog.listPriceOf('openai', 'dated-model')).toMatchObject({ validUntil: Infinity });
  });

  it('refuses an unpriced candidate under a blocking budget, and counts it as 0 when allowed', async () => {
    const { catalog } = await countingCatalog();
    const unpriced = candidate('openai', 'no-such-model-xyz');
    expect(() => worstCaseCost([unpriced], body, { prices: [], unpricedBudgetPolicy: 'block' }, catalog as ModelCatalog)).toThrow(/has no price/);
    expect(worstCaseCost([unpriced], body, { prices: [], unpricedBudgetPolicy: 'allow' }, catalog)).toBe(0);
    expect(worstCaseCost([unpriced], body, { prices: [rate('no-such-model-xyz', null, 1, 1)], unpricedBudgetPolicy: 'block' }, catalog)).toBeGreaterThan(0);
  });
});
