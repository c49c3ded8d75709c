import type { ListPrice, ModelCatalog } from '../catalog/model-catalog';
import type { ProviderKind } from '../providers/kinds';
import { billedModel } from '../routing/candidates';
import type { PriceEntry } from '../routing/org-config';

/**
 * Which source prices a model served by a connection kind under an organization's rates (spec
 * 2.2), and at what rates: the customer's rate for this provider, the customer's rate for the
 * model, the vendor's list price, or none (unpriced, which is not free).
 */
export type ResolvedPrice =
  | { readonly source: 'custom_provider' | 'custom'; readonly rates: PriceEntry }
  | { readonly source: 'list'; readonly list: ListPrice }
  | { readonly source: 'none' };

export type PriceQuery = {
  kind: ProviderKind;
  upstreamModel: string;
  modelId: string;
  /** The organization's custom rates (OrgConfig `prices`). */
  prices: readonly PriceEntry[];
  catalog: ModelCatalog;
};

const UNPRICED: ResolvedPrice = Object.freeze({ source: 'none' });

/**
 * Entries kept per organization's rates. An organization calls a bounded set of models, but the
 * names come from requests; past the cap the entries are dropped and resolved again as asked.
 */
const ENTRIES_PER_ORG = 256;

/** Entries by model id, then upstream model, then kind: nested maps, so a lookup builds no key string. */
type Entries = Map<string, Map<string, Map<ProviderKind, ResolvedPrice>>>;
type Memo = { catalog: ModelCatalog; entries: Entries; size: number };

/**
 * Resolutions by the rates array they were made under. An OrgConfig is rebuilt whole when its
 * configuration changes, so a changed rate is a new array: its entries start empty and the old
 * ones go with the old config. The catalog is part of the key so a test's catalog never sees
 * another's entries.
 */
const memos = new WeakMap<readonly PriceEntry[], Memo>();

const rated = (p: PriceEntry) => p.inputPerMillion !== null || p.outputPerMillion !== null;

function resolve(q: PriceQuery): ResolvedPrice {
  if (q.prices.length > 0) {
    const names = [q.modelId, q.upstreamModel, q.modelId.slice(q.modelId.indexOf('/') + 1)];
    const matching = q.prices.filter((p) => names.includes(p.model));
    const forProvider = matching.find((p) => p.provider === q.kind);
    if (forProvider && rated(forProvider)) return { source: 'custom_provider', rates: forProvider };
    const forModel = matching.find((p) => p.provider === null);
    if (forModel && rated(forModel)) return { source: 'custom', rates: forModel };
  }
  // A deployment (a connection's model map: Azure's `prod-mini` for gpt-4o-mini) is listed under
  // the model it was mapped from, which is also what the ledger bills it as (billedModel).
  const mappedFrom = billedModel(q);
  const list = q.catalog.listPriceOf(q.kind, q.upstreamModel) ?? (mappedFrom !== q.upstreamModel ? q.catalog.listPriceOf(q.kind, mappedFrom) : null);
  return list ? { source: 'list', list } : UNPRICED;
}

function memoOf(q: PriceQuery): Memo {
  let memo = memos.get(q.prices);
  if (!memo || memo.catalog !== q.catalog || memo.size >= ENTRIES_PER_ORG) {
    memo = { catalog: q.catalog, entries: new Map(), size: 0 };
    memos.set(q.prices, memo);
  }
  return memo;
}

/**
 * The price of a model under an organization's rates, resolved once and kept until the rates
 * change (a new OrgConfig) or a dated list price starts. The worst case held before a request
 * and the cost settled after it both read this entry.
 */
export function resolvedPrice(q: PriceQuery): ResolvedPrice {
  const memo = memoOf(q);
  let byUpstream = memo.entries.get(q.modelId);
  if (!byUpstream) memo.entries.set(q.modelId, (byUpstream = new Map()));
  let byKind = byUpstream.get(q.upstreamModel);
  if (!byKind) byUpstream.set(q.upstreamModel, (byKind = new Map()));
  const known = byKind.get(q.kind);
  if (known && !(known.source === 'list' && known.list.expired())) return known;
  const entry = resolve(q);
  if (!known) memo.size += 1;
  byKind.set(q.kind, entry);
  return entry;
}
