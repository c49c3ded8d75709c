import { boundedCache } from '../bounded-cache';
import { DEFAULT_OUTPUT_CEILING, type ModelCatalog } from '../catalog/model-catalog';
import type { ProviderKind } from '../providers/kinds';
import { NATIVE_REQUEST, TRANSLATED_EFFORT, type ChatBody, type ProviderAdapter } from '../providers/types';

/** The only parameters the gateway may drop (spec 4.1, X-GW-Params-Dropped). */
export const DROPPABLE_PARAMS = ['temperature', 'top_p', 'top_k', 'frequency_penalty', 'presence_penalty', 'seed', 'logprobs', 'top_logprobs', 'logit_bias'] as const;
const DROPPABLE = new Set<string>(DROPPABLE_PARAMS);

export function isDroppable(param: string): boolean {
  return DROPPABLE.has(param);
}

/** What learned refusals are keyed by: one connection (its id and the host it calls), never a whole provider kind. */
export type LearningConnection = { id: string; baseUrl: string };

/**
 * Parameters a model refused without a known rule, learned from its 400 and remembered per
 * connection and model so later requests on that connection drop them without a wasted call.
 * Per connection, not per kind: what one organization's server refuses (a self-hosted or
 * proxied `openai` base URL, say) must never change another organization's requests. Bounded
 * (least recently used entries go first).
 */
export type LearnedParams = {
  get(connection: LearningConnection, model: string): ReadonlySet<string>;
  learn(connection: LearningConnection, model: string, param: string): void;
};

const NONE_LEARNED: ReadonlySet<string> = new Set();

export function createLearnedParams(max = 10_000): LearnedParams {
  const store = boundedCache<string, Set<string>>(max);
  const keyOf = (c: LearningConnection, model: string) => `${c.id}\n${c.baseUrl}\n${model}`;
  return {
    get: (connection, model) => store.get(keyOf(connection, model)) ?? NONE_LEARNED,
    learn(connection, model, param) {
      const key = keyOf(connection, model);
      store.set(key, new Set([...(store.get(key) ?? []), param]));
    },
  };
}

export type PreparedBody = { body: ChatBody; dropped: string[]; defaultMaxTokens: number };

/**
 * The body one candidate is sent: sampling parameters its model refuses dropped (and named),
 * the client's output cap sent once (renamed for families that want `max_completion_tokens`),
 * and the output cap a kind requiring one gets when the client gave none. Under a blocking budget
 * (`forceOutputCeiling`) every kind is sent that cap (spec 4.1): it bounds the worst case
 * the reservation holds. `learned` is what this candidate's connection refused before.
 *
 * What a client protocol's translation could not carry to this candidate is named beside them
 * (under the client's names): a translated reasoning effort its wire or model does not take
 * (TRANSLATED_EFFORT), and the fields of a native request its connection is not sent
 * (`adapter.nativeLeftOut`, given the connection's `config`).
 */
export function prepareBody(body: ChatBody, kind: ProviderKind, model: string, adapter: ProviderAdapter, catalog: ModelCatalog, learned: ReadonlySet<string>, forceOutputCeiling = false, config: Record<string, unknown> = {}): PreparedBody {
  const rules = catalog.paramRules(kind, model);
  const refused = new Set([...rules.drop, ...adapter.unsupportedSampling, ...learned]);
  if (rules.exclusive && body[rules.exclusive[0]] !== undefined && body[rules.exclusive[1]] !== undefined) refused.add(rules.exclusive[1]);
  const dropped = Object.keys(body).filter((k) => refused.has(k) && isDroppable(k) && body[k] !== undefined);
  const out: ChatBody = { ...body };
  for (const k of dropped) delete out[k];
  // One output cap is sent, and it is the one the budget held: under the client's name when it
  // gave one, `max_completion_tokens` for families that refuse `max_tokens`, and `max_tokens`
  // (the name every compatible server knows) when the client gave both.
  const requested = requestedMaxTokens(body);
  if (requested !== undefined) {
    const field = rules.maxTokensField === 'max_completion_tokens' || body.max_tokens === undefined ? 'max_completion_tokens' : 'max_tokens';
    delete out.max_tokens;
    delete out.max_completion_tokens;
    out[field] = requested;
  }
  const defaultMaxTokens = outputCeiling(catalog, kind, model);
  if (forceOutputCeiling && out.max_tokens === undefined && out.max_completion_tokens === undefined) out[rules.maxTokensField] = defaultMaxTokens;
  const native = body[NATIVE_REQUEST];
  const sentNatively = native !== undefined && native.wire === adapter.nativeWire;
  if (sentNatively && adapter.nativeLeftOut) dropped.push(...adapter.nativeLeftOut(native, config));
  const effortFrom = body[TRANSLATED_EFFORT];
  if (effortFrom !== undefined && !takesReasoningEffort(adapter, catalog, kind, model)) {
    delete out.reasoning_effort;
    // A native request carries the effort in its own words.
    if (!sentNatively) dropped.push(effortFrom);
  }
  return { body: out, dropped, defaultMaxTokens };
}

/**
 * Whether a candidate takes a reasoning effort: its wire has the field and the catalog says its
 * model reasons (a model that does not refuses the field with a 400; one the catalog does not
 * know is not guessed at).
 */
function takesReasoningEffort(adapter: ProviderAdapter, catalog: ModelCatalog, kind: ProviderKind, model: string): boolean {
  return adapter.reasoningEffort === true && catalog.lookup(kind, model)?.reasoning === true;
}

/**
 * The output cap the client asked for. `max_completion_tokens` is an alias of `max_tokens`
 * (spec 4.1); given both, the larger stands: it is what the budget holds and the one value sent.
 */
export function requestedMaxTokens(body: Pick<ChatBody, 'max_tokens' | 'max_completion_tokens'>): number | undefined {
  const { max_tokens: a, max_completion_tokens: b } = body;
  if (typeof a !== 'number') return typeof b === 'number' ? b : undefined;
  return typeof b === 'number' ? Math.max(a, b) : a;
}

/** The most a model may write: its catalogued maximum output, else 32,768 (spec 8). */
export function outputCeiling(catalog: ModelCatalog, kind: ProviderKind, model: string): number {
  return catalog.lookup(kind, model)?.maxOutput ?? DEFAULT_OUTPUT_CEILING;
}
