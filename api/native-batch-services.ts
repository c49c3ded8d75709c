import { eq } from 'drizzle-orm';
import type { KeyContext } from '../core/auth/gateway-key-auth';
import { refuseKey } from '../core/auth/gateway-key-auth';
import { atBatchRate, nativeBatchWire, type NativeBatchPlan } from '../core/batches/native-wire';
import { spendLedger } from '../core/db/schema';
import { GatewayError } from '../core/errors';
import { estimateCost, type PriceSource } from '../core/pricing/cost';
import { ADAPTERS } from '../core/providers/adapters';
import type { ChatBody, ChatMessage, Usage } from '../core/providers/types';
import { planCandidates, type Candidate, type PlanInput } from '../core/routing/candidates';
import type { OrgConfig } from '../core/routing/org-config';
import type { ModelCatalog } from '../core/catalog/model-catalog';
import { estimatedTokens, inputList, priced as pricedEmbeddings } from './gateway/embeddings';
import { mediaModelKnown } from './gateway/media-call';
import { JOB_HOLD_LEASE_MS, reserveJobSpend } from '../core/spend/job-spend';
import { spendScopes } from '../core/spend/scopes';
import { worstCaseCost } from '../core/spend/worst-case';
import type { AppDeps } from './app';
import { anthropicErrorBody } from './gateway/protocols/anthropic-messages';

/** An answered item's cost and the usage it was priced on (the chat usage shape the request log keeps). */
export type NativeItemPrice = { cost: number | null; source: PriceSource | null; usage: Usage | null };

/** The answer a spend limit gave, in the batch's wire: what the items it had no room for end with. */
export type NativeRefusal = { statusCode: number; body: unknown };

/**
 * What a worker asks of the gateway's configuration to run a batch on a provider's own batch
 * API (issue 56): where it goes, its worst case held against the key's limits, and what an
 * answered item costs at batch rates. Answered from the API's own runtime in the worker
 * (api/in-process-gateway.ts), so routes, keys, limits and prices are read exactly as a
 * request reads them.
 */
export type NativeBatchServices = {
  /**
   * The provider batch a batch of one model goes to: the route's first candidate, when its
   * connection's provider has a batch API for this endpoint and no guardrail policy applies to
   * the key (a provider's batch never passes through the gateway's checks). Null otherwise: the
   * gateway runs the items, each meeting every rule (a model the key may not call, a revoked
   * key: each item answers the refusal).
   */
  plan(input: { keyId: string; endpoint: string; model: string }): Promise<NativeBatchPlan | null>;
  /**
   * Holds one part's worst case (each item's, at batch rates) in every spend scope of the key,
   * as one job hold `holdId`; answers the refusal when a limit has no room (nothing held then).
   * A part already held is not held again.
   */
  hold(input: { holdId: string; keyId: string; plan: NativeBatchPlan; bodies: Record<string, unknown>[]; leaseMs: number }): Promise<NativeRefusal | null>;
  /** What an answered item costs at batch rates (null: unpriced), by which source, from the usage in its answer. */
  price(input: { orgId: string; plan: NativeBatchPlan; body: unknown }): Promise<NativeItemPrice>;
};

type KeyOf = (keyId: string) => Promise<KeyContext | null>;

/** An embeddings answer's usage (`prompt_tokens`), as a chat usage with no output. */
function embeddingUsage(body: unknown): Usage | null {
  const tokens = (body as { usage?: { prompt_tokens?: unknown } } | null)?.usage?.prompt_tokens;
  return typeof tokens === 'number' && Number.isFinite(tokens) ? { prompt_tokens: tokens, completion_tokens: 0, total_tokens: tokens } : null;
}

/**
 * The chat body the worst case is estimated on: a Messages body's `system` counted with its
 * prompt (the chat estimate reads `messages` and `tools`), its `max_tokens` as the output cap.
 */
function estimationBody(body: Record<string, unknown>): ChatBody {
  const messages = Array.isArray(body.messages) ? (body.messages as ChatMessage[]) : [];
  const system = body.system === undefined ? [] : [{ role: 'system', content: typeof body.system === 'string' ? body.system : JSON.stringify(body.system) } as ChatMessage];
  return { ...body, model: String(body.model ?? ''), messages: [...system, ...messages] } as ChatBody;
}

/**
 * An item's worst case at the standard rates: a chat or Messages request's as the chat path holds
 * it; an embeddings request's as its path does (its input tokens, estimated, priced). Null: unpriced.
 */
function itemWorstCase(candidate: Candidate, config: OrgConfig, endpoint: string, body: Record<string, unknown>, catalog: ModelCatalog): number | null {
  if (endpoint === '/v1/embeddings') {
    const tokens = estimatedTokens(inputList(body.input as Parameters<typeof inputList>[0]));
    return pricedEmbeddings(candidate, config, { catalog }, tokens)?.cost ?? null;
  }
  try {
    return worstCaseCost([candidate], estimationBody(body), { prices: config.prices, unpricedBudgetPolicy: 'block' }, catalog);
  } catch (err) {
    if (err instanceof GatewayError) return null;
    throw err;
  }
}

export function createNativeBatchServices(deps: Pick<AppDeps, 'db' | 'gateway'>, keyOf: KeyOf): NativeBatchServices {
  const { gateway } = deps;

  /** Planning as the endpoint's own path plans: chat's catalog, or the embedding models' (api/gateway/media-call.ts). */
  const planInput = (key: KeyContext, config: OrgConfig, model: string, endpoint: string): PlanInput => ({
    model, fallbacks: [], key, config, catalog: gateway.catalog, catalogModelsOnly: true,
    ...(endpoint === '/v1/embeddings' && { knows: mediaModelKnown('embeddings', config) }),
  });

  /** The plan's candidate, as the request path would build it now. */
  async function candidateOf(key: KeyContext, plan: NativeBatchPlan): Promise<Candidate | null> {
    const config = await gateway.orgConfig.get(key.orgId);
    const found = planCandidates(planInput(key, config, plan.model, plan.endpoint)).candidates.find((c) => c.connection.id === plan.connectionId);
    return found ?? null;
  }

  return {
    async plan({ keyId, endpoint, model }) {
      const key = await keyOf(keyId);
      if (!key || refuseKey(key, new Date(), null)) return null;
      const config = await gateway.orgConfig.get(key.orgId);
      let first: Candidate | undefined;
      let routeSlug: string | null = null;
      try {
        const planned = planCandidates(planInput(key, config, model, endpoint));
        // A route may keep its batches on the gateway's own path (`batch_mode: gateway`).
        if (planned.route?.batchMode === 'gateway') return null;
        [first] = planned.candidates;
        routeSlug = planned.route?.slug ?? null;
      } catch (err) {
        if (err instanceof GatewayError) return null;
        throw err;
      }
      if (!first) return null;
      const wire = nativeBatchWire(first.connection.kind, endpoint);
      if (!wire) return null;
      if (await gateway.guardrails.rulesFor(key)) return null;
      return { model, endpoint, routeSlug, connectionId: first.connection.id, kind: first.connection.kind, wire, upstreamModel: first.upstreamModel, modelId: first.modelId };
    },

    async hold({ holdId, keyId, plan, bodies, leaseMs }) {
      const [held] = await deps.db.select({ state: spendLedger.state }).from(spendLedger).where(eq(spendLedger.jobId, holdId));
      if (held) return null;
      const key = await keyOf(keyId);
      const refusal = (err: GatewayError): NativeRefusal => ({ statusCode: err.status, body: plan.wire === 'anthropic' ? anthropicErrorBody(err) : err.toBody() });
      if (!key) return refusal(new GatewayError('authentication', 'The key that created this batch no longer exists.'));
      const config = await gateway.orgConfig.get(key.orgId);
      const candidate = await candidateOf(key, plan);
      let estimate = 0;
      let unpriced = candidate === null;
      for (const body of bodies) {
        if (!candidate) break;
        const worst = itemWorstCase(candidate, config, plan.endpoint, body, gateway.catalog);
        if (worst === null) unpriced = true;
        else estimate += worst;
      }
      const now = new Date();
      try {
        await reserveJobSpend(deps.db, gateway.spend, {
          orgId: key.orgId, lineageId: key.lineageId, projectId: key.projectId, memberId: key.createdByMemberId, jobId: holdId,
          estimate: atBatchRate(estimate), unpriced,
          scopes: spendScopes(key, config, [], now), unpricedBudgetPolicy: config.unpricedBudgetPolicy, now, leaseMs: Math.max(leaseMs, JOB_HOLD_LEASE_MS),
        });
      } catch (err) {
        if (err instanceof GatewayError) return refusal(err);
        throw err;
      }
      return null;
    },

    async price({ orgId, plan, body }) {
      const config = await gateway.orgConfig.get(orgId);
      let usage: Usage | null;
      try {
        usage = plan.endpoint === '/v1/embeddings' ? embeddingUsage(body) : ADAPTERS[plan.kind].parseResponse(body).usage;
      } catch {
        return { cost: null, source: null, usage: null };
      }
      const estimate = estimateCost({ kind: plan.kind, upstreamModel: plan.upstreamModel, modelId: plan.modelId, prices: config.prices, catalog: gateway.catalog, usage });
      if (!estimate) return { cost: null, source: null, usage };
      // A cost the provider reported is its bill already; a priced one is at the standard rates.
      const cost = estimate.source === 'provider' ? estimate.cost : atBatchRate(estimate.cost);
      return { cost, source: estimate.source, usage };
    },
  };
}
