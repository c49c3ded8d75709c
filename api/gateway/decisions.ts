import type Router from '@koa/router';
import type { ValidateFunction } from 'ajv';
import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { boundedCache } from '../../core/bounded-cache';
import { completeChat, type NotServed, type Served } from '../../core/chat/execute';
import type { Database } from '../../core/db/client';
import { decisionPolicies, type DecisionPolicyRow } from '../../core/db/schema';
import { answerObject, decisionChatBody } from '../../core/decisions/answer';
import { compileOutputSchema, schemaViolation } from '../../core/decisions/output-schema';
import { GatewayError } from '../../core/errors';
import { newId } from '../../core/ids';
import { errorSummary } from '../../core/logger';
import type { CostEstimate } from '../../core/pricing/cost';
import type { ChatResult } from '../../core/providers/types';
import { planCandidates, type Plan } from '../../core/routing/candidates';
import type { GatewayContext, GatewayState } from '../context';
import { parseInput } from '../validation';
import { wholeAnswerUsage } from './billed-usage';
import { chatCallDeps, costOf, guardAnswer, guardInput, logRequest, reserveBudget, type ChatCall } from './chat-call';
import { parseAttribution, routingMetadata } from './chat-request';
import type { GatewayServices } from './services';
import { endSpend } from './spend-step';

/**
 * `POST /v1/decisions/{slug}` (spec 4.3, issue 24): a decision policy's typed answer inside its
 * deadline, or its fallback. The model call is a chat call (routing, failover, spend hold and
 * settle, guardrails, a request-log row with endpoint `decisions`); what the gateway refuses
 * itself (401, 402, 403, 429) is never replaced by the fallback.
 */

const requestSchema = z.strictObject({
  input: z.unknown().refine((v) => v !== undefined, 'Required'),
  deadline_ms: z.number().int().min(1).max(120_000).optional(),
  metadata: z.unknown().optional(),
});

/** Why the fallback answered. */
type FallbackReason = 'deadline' | 'invalid_output' | 'upstream_error';

/** Planning refusals that mean the key may not call the policy's model: the one 404 (no hint that the policy exists). */
const MAY_NOT_CALL = new Set(['model_not_allowed', 'route_not_allowed', 'connection_out_of_scope']);

const notFound = (slug: string) => new GatewayError('decision_policy_not_found', `No decision policy \`${slug}\` that this key may call.`);

/** A compiled schema per policy version (compiling is the costly part). */
const validators = boundedCache<string, ValidateFunction>(1_000);
function validatorOf(policy: DecisionPolicyRow): ValidateFunction {
  const id = `${policy.id}:${policy.version}`;
  let validate = validators.get(id);
  if (!validate) {
    const compiled = compileOutputSchema(policy.outputSchema);
    // Checked at every write; a schema that no longer compiles (a newer ajv) is the policy's fault, said plainly.
    if (!compiled.ok) throw new GatewayError('invalid_request', `Decision policy \`${policy.slug}\` has an invalid \`output_schema\`: ${compiled.reason}.`);
    validators.set(id, (validate = compiled.validate));
  }
  return validate;
}

/** One model call's end, as the decision reads it. */
type CallEnd =
  | { kind: 'served'; served: Served<ChatResult>; decision: Record<string, unknown> | null; estimate: CostEstimate; usage: ChatResult['usage'] }
  | { kind: 'failed'; error: GatewayError }
  | { kind: 'deadline' };

type Totals = { prompt: number; completion: number; cost: number | null; priced: boolean; source: string | null };

export function decisionRoutes(router: Router<GatewayState>, deps: { db: Database; gateway: GatewayServices }): void {
  const services = deps.gateway;

  router.post('/decisions/:slug', async (ctx: GatewayContext) => {
    const started = performance.now();
    const key = ctx.state.key!;
    const slug = String(ctx.params.slug);
    const input = parseInput(requestSchema, ctx.state.body ?? {});
    const [policy] = slug.length > 64 ? [] : await deps.db.select().from(decisionPolicies)
      .where(and(eq(decisionPolicies.orgId, key.orgId), eq(decisionPolicies.slug, slug), eq(decisionPolicies.enabled, true)));
    if (!policy || (policy.projectIds.length > 0 && !policy.projectIds.includes(key.projectId))) throw notFound(slug);
    // A caller may only shorten the policy's deadline.
    const deadlineAt = started + Math.min(policy.deadlineMs, input.deadline_ms ?? Infinity);
    const validate = validatorOf(policy);
    const attribution = parseAttribution(input.metadata);
    const config = await services.orgConfig.get(key.orgId);
    const body = decisionChatBody(policy.model, { slug: policy.slug, instructions: policy.instructions, outputSchema: policy.outputSchema, maxTokens: policy.maxTokens }, input.input);
    const decisionId = newId('dec');
    const newCall = (callId: string): ChatCall => ({
      ctx, services, key, config, endpoint: 'decisions', plan: null, body, attribution, logging: true, started: performance.now(), createdAt: new Date(), hold: null, cache: null,
      callId, decisionId,
    });

    let plan: Plan;
    const first = newCall(ctx.state.requestId);
    try {
      plan = planCandidates({
        model: policy.model, fallbacks: [], key, config, catalog: services.catalog, catalogModelsOnly: true,
        metadata: routingMetadata(attribution),
      });
    } catch (err) {
      if (err instanceof GatewayError && err.code !== null && MAY_NOT_CALL.has(err.code)) throw notFound(slug);
      if (err instanceof GatewayError) logRequest(first, { status: err.status, attempts: [], error: err });
      throw err;
    }

    const deadline = startDeadline(deadlineAt);
    const totals: Totals = { prompt: 0, completion: 0, cost: 0, priced: true, source: null };
    let last: Served<ChatResult> | null = null;
    let end: CallEnd | null = null;
    // At most two model calls: an answer that is not valid is asked once more if time is left.
    try {
      for (let round = 0; round < 2; round++) {
        // No time left for the second try: the first answer's invalidity is the reason.
        if (round > 0 && deadline.signal.aborted) break;
        const call = round === 0 ? first : newCall(newId('req'));
        call.plan = plan;
        end = await modelCall(call, plan, validate, deadline);
        if (end.kind === 'served') {
          last = end.served;
          addUsage(totals, end.usage, end.estimate);
        }
        if (end.kind !== 'served' || end.decision !== null) break;
      }
    } finally {
      deadline.stop();
    }

    const answer = (decision: Record<string, unknown>, source: 'model' | 'fallback', reason: FallbackReason | null) => {
      ctx.body = {
        id: decisionId,
        object: 'decision',
        policy: policy.slug,
        policy_version: policy.version,
        decision,
        source,
        reason,
        model: last ? last.value.model ?? last.candidate.upstreamModel : null,
        provider: last?.candidate.connection.kind ?? null,
        connection: last?.candidate.connection.id ?? null,
        usage: {
          prompt_tokens: totals.prompt, completion_tokens: totals.completion, total_tokens: totals.prompt + totals.completion,
          cost: totals.priced ? Math.round(totals.cost! * 1e9) / 1e9 : null, price_source: totals.priced ? totals.source : null,
        },
        latency_ms: Math.round(performance.now() - started),
      };
    };
    if (!end) throw new Error('a decision ended without a model call');
    if (end.kind === 'served' && end.decision) return answer(end.decision, 'model', null);
    const reason: FallbackReason = end.kind === 'deadline' ? 'deadline' : end.kind === 'failed' ? 'upstream_error' : 'invalid_output';
    if (policy.fallback) return answer(policy.fallback, 'fallback', reason);
    if (end.kind === 'failed') throw end.error;
    if (end.kind === 'deadline') throw new GatewayError('decision_deadline', `Decision policy \`${policy.slug}\` got no valid answer within its deadline, and has no fallback.`);
    throw new GatewayError('upstream_error', `The model's answer was not valid against decision policy \`${policy.slug}\`'s \`output_schema\`, twice, and the policy has no fallback.`);
  });
}

function addUsage(totals: Totals, usage: ChatResult['usage'], estimate: CostEstimate): void {
  totals.prompt += usage?.prompt_tokens ?? 0;
  totals.completion += usage?.completion_tokens ?? 0;
  if (!estimate) totals.priced = false;
  else {
    totals.cost = (totals.cost ?? 0) + estimate.cost;
    totals.source = estimate.source;
  }
}

/** A decision's deadline: a signal that aborts what is under way, and a promise that settles when it passes. */
type Deadline = { signal: AbortSignal; reached: Promise<CallEnd>; stop(): void };

function startDeadline(at: number): Deadline {
  const cut = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const reached = new Promise<CallEnd>((resolve) => {
    timer = setTimeout(() => {
      cut.abort(new Error('decision deadline'));
      resolve({ kind: 'deadline' });
    }, Math.max(0, at - performance.now()));
  });
  return { signal: cut.signal, reached, stop: () => clearTimeout(timer) };
}

/**
 * The row and the hold of a call the deadline cut: a call already sent is charged its prompt
 * (the provider works on, and bills, what it was sent; chatCallDeps), one never sent nothing.
 */
function endAtDeadline(call: ChatCall): CallEnd {
  endSpend(call, null);
  const error = new GatewayError('decision_deadline', 'The decision\'s deadline passed during this call; it was aborted.');
  logRequest(call, { status: error.status, attempts: [], error });
  return { kind: 'deadline' };
}

/**
 * One model call of a decision: guardrails and the spend hold first (their refusals are thrown,
 * never replaced by the fallback), then the chat call. The deadline covers all of it: when it
 * passes the answer does not wait; the call is aborted (or never sent), and its hold and its
 * request-log row are settled as it ends.
 */
async function modelCall(call: ChatCall, plan: Plan, validate: ValidateFunction, deadline: Deadline): Promise<CallEnd> {
  const work = (async (): Promise<CallEnd> => {
    await guardInput(call);
    await reserveBudget(call);
    if (deadline.signal.aborted) return endAtDeadline(call);
    const deps = chatCallDeps(call);
    let result: Served<ChatResult> | NotServed;
    try {
      result = await completeChat(plan, call.body, deps, deadline.signal, deadline.signal);
    } catch (err) {
      if (deadline.signal.aborted) return endAtDeadline(call);
      // A defect, not a deadline: the hold is given back and the error answered as one.
      endSpend(call, null);
      logRequest(call, { status: 500, attempts: [], error: new GatewayError('internal_error', 'The gateway hit an internal error.') });
      throw err;
    }
    return settle(call, result, validate);
  })();
  // Once the deadline has answered, what the call does later (a refusal, a defect) is its own
  // step's to log; it must not surface as an unhandled rejection.
  work.catch((err: unknown) => {
    if (deadline.signal.aborted) call.ctx.state.log?.warn({ err: errorSummary(err) }, 'decision model call ended after its deadline');
  });
  return Promise.race([work, deadline.reached]);
}

/** A call's end: cost settled, row logged, the answer read and checked against the schema. */
async function settle(call: ChatCall, result: Served<ChatResult> | NotServed, validate: ValidateFunction): Promise<CallEnd> {
  if (!result.ok) {
    endSpend(call, null);
    logRequest(call, { status: result.error.status, attempts: result.attempts, error: result.error });
    return { kind: 'failed', error: result.error };
  }
  let estimate: CostEstimate = null;
  try {
    const usage = wholeAnswerUsage(call.body, result.value);
    estimate = costOf(call, result, usage);
    const model = result.value.model ?? result.candidate.upstreamModel;
    if (call.guard) await guardAnswer(call, result, model, estimate);
    const object = answerObject(result.value);
    const decision = object && schemaViolation(validate, object) === null ? object : null;
    logRequest(call, { status: 200, served: result, servedModel: model, attempts: result.attempts, usage, estimate, response: result.value.choices });
    return { kind: 'served', served: result, decision, estimate, usage };
  } finally {
    // Once, whatever happened above (endSpend ends a hold at most once).
    endSpend(call, estimate);
  }
}
