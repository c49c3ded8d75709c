import { loadModelCatalog, type ModelCatalog } from '../../core/catalog/model-catalog';

describe('model catalog (models.dev + genai-prices + family rules)', () => {
  let catalog: ModelCatalog;
  beforeAll(async () => {
    catalog = await loadModelCatalog();
  });

  it('knows limits and modalities from models.dev', () => {
    const m = catalog.lookup('openai', 'gpt-4o-mini');
    expect(m).toMatchObject({ maxOutput: 16384, inputModalities: expect.arrayContaining(['text', 'image']), acceptsTemperature: true });
    expect(catalog.kindsListing('gpt-4o-mini')).toContain('openai');
  });

  it('prices by the vendor list: gpt-4o-mini $0.15 / $0.60 per million', () => {
    const price = catalog.listPrice('openai', 'gpt-4o-mini', { inputTokens: 1_000_000, cachedInputTokens: 0, outputTokens: 1_000_000 });
    expect(price).toBeCloseTo(0.75, 10);
    expect(catalog.listPrice('openai', 'no-such-model-xyz', { inputTokens: 1, cachedInputTokens: 0, outputTokens: 1 })).toBeNull();
  });

  it('applies parameter rules: reasoning families drop sampling and want max_completion_tokens; Claude 4.5 keeps temperature over top_p', () => {
    expect(catalog.paramRules('openai', 'o3-mini')).toMatchObject({ drop: expect.arrayContaining(['temperature', 'top_p']), maxTokensField: 'max_completion_tokens' });
    expect(catalog.paramRules('openai', 'gpt-4o-mini')).toEqual({ drop: [], exclusive: null, maxTokensField: 'max_tokens' });
    expect(catalog.paramRules('anthropic', 'claude-sonnet-4-5').exclusive).toEqual(['temperature', 'top_p']);
  });

  it('derives once what it derives from the static catalogs: the same rules object, listing and sorted models on every call', () => {
    const rules = catalog.paramRules('openai', 'o3-mini');
    expect(catalog.paramRules('openai', 'o3-mini')).toBe(rules);
    expect(Object.isFrozen(rules) && Object.isFrozen(rules.drop)).toBe(true);
    expect(catalog.paramRules('azure_openai', 'o3-mini')).not.toBe(rules);
    expect(catalog.kindsListing('gpt-4o-mini')).toBe(catalog.kindsListing('gpt-4o-mini'));
    expect(catalog.kindsListing('no-such-model-xyz')).toEqual([]);
    const models = catalog.modelsOf('openai');
    expect(models).toEqual([...models].sort());
    expect(catalog.modelsOf('openai')).toBe(models);
  });
});
