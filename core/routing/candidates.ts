import type { KeyContext } from '../auth/gateway-key-auth';
import type { ModelCatalog } from '../catalog/model-catalog';
import { GatewayError } from '../errors';
import { isProviderKind, kindSpec, type ProviderKind } from '../providers/kinds';
import type { ConnectionConfig, FailoverAction, OrgConfig, RouteConfig } from './org-config';
import type { FailureKind } from '../providers/types';
import type { RouteTarget } from '../db/schema';

/** One place a request may be sent: a connection and the model name that connection knows. */
export type Candidate = {
  connection: ConnectionConfig;
  /** The model name sent upstream (after a connection's model map). */
  upstreamModel: string;
  /** The model id as the client would name it (`<vendor>/<name>`), for pricing and logs. */
  modelId: string;
  /** Whether it came from `fallbacks`. */
  fallback: boolean;
};

export type Plan = {
  candidates: Candidate[];
  route: RouteConfig | null;
  failover: Record<FailureKind, FailoverAction>;
  maxRetries: number;
  timeoutMs: number | null;
};

export type PlanInput = {
  model: string;
  fallbacks: string[];
  allow?: string[];
  deny?: string[];
  metadata?: Record<string, unknown>;
  key: KeyContext;
  config: OrgConfig;
  catalog: ModelCatalog;
  /**
   * Chat names must be models a catalog knows (spec 7: 404 model_not_found), unless a
   * connection's model map names them; video models are in no catalog and are not checked.
   */
  catalogModelsOnly?: boolean;
  /**
   * Which models the endpoint knows, when not the chat catalog's (images and audio: the media
   * price table and the organization's per-unit rates).
   */
  knows?: (kind: ProviderKind, model: string) => boolean;
  random?: () => number;
};

/** For a model named directly: every failure kind retries once, then moves on. */
const DIRECT_FAILOVER: Record<FailureKind, FailoverAction> = { rate_limit: 'retry', server_error: 'retry', timeout: 'retry', connection: 'retry', credential: 'retry', moderation: 'retry' };
const DIRECT_MAX_RETRIES = 1;

/** The chain position names of spec 2.2: `primary`, then `standby_a`, `standby_b`, ... */
export function chainPosition(index: number): string {
  if (index === 0) return 'primary';
  let n = index - 1;
  let suffix = '';
  do {
    suffix = String.fromCharCode(97 + (n % 26)) + suffix;
    n = Math.floor(n / 26) - 1;
  } while (n >= 0);
  return `standby_${suffix}`;
}

function checkProviderSelection(allow: string[] | undefined, deny: string[] | undefined): void {
  for (const id of [...(allow ?? []), ...(deny ?? [])]) {
    if (!isProviderKind(id)) throw new GatewayError('unknown_provider', `Unknown provider \`${id}\` in \`routing.providers\`.`);
  }
  const both = (allow ?? []).find((id) => (deny ?? []).includes(id));
  if (both) throw new GatewayError('invalid_provider_selection', `Provider \`${both}\` is both allowed and denied in \`routing.providers\`.`);
}

/** Whether a connection may serve this key and request: scope narrows, never widens. */
function reachable(c: ConnectionConfig, input: PlanInput): boolean {
  const { key } = input;
  if (!c.enabled) return false;
  // Empty means every environment, including keys with none.
  if (c.environments.length > 0 && (key.environment === null || !c.environments.includes(key.environment))) return false;
  if (key.allowedProviders.length > 0 && !key.allowedProviders.includes(c.kind)) return false;
  if (input.allow && input.allow.length > 0 && !input.allow.includes(c.kind)) return false;
  if (input.deny?.includes(c.kind)) return false;
  return true;
}

function shuffled<T>(items: T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

type ParsedModel = { kind: ProviderKind | null; name: string; id: string };

/** `<vendor>/<name>` or a bare name; the vendor is a provider kind when it names one. */
function parseModel(model: string): ParsedModel {
  const slash = model.indexOf('/');
  if (slash > 0) {
    const vendor = model.slice(0, slash);
    if (isProviderKind(vendor)) return { kind: vendor, name: model.slice(slash + 1), id: model };
  }
  return { kind: null, name: model, id: model };
}

/**
 * The model a candidate is billed for, as the ledger records it and commitments match it: the
 * name before the connection's model map, without a provider-kind prefix. An Azure deployment
 * `prod-4o` mapped from `gpt-4o` bills `gpt-4o`; the provider's own snapshot name needs nothing
 * more (commitments compare canonical models).
 */
export function billedModel(c: Pick<Candidate, 'modelId'>): string {
  return parseModel(c.modelId).name;
}

/** What a connection calls this model upstream, or null if it does not serve it. */
function upstreamNameFor(c: ConnectionConfig, parsed: ParsedModel): string | null {
  const mapped = c.modelMap[parsed.id] ?? c.modelMap[parsed.name];
  if (mapped) return mapped;
  if (parsed.kind !== c.kind) return null;
  // Kinds whose models the customer names serve only what the map lists, when it lists any.
  if (kindSpec(c.kind).takesModelMap && Object.keys(c.modelMap).length > 0) return null;
  return parsed.name;
}

function knowsModel(input: PlanInput, kind: ProviderKind, name: string): boolean {
  return input.knows ? input.knows(kind, name) : input.catalog.knows(kind, name);
}

/**
 * Resolves a model name to the connections able to serve it, with the vendor it belongs to.
 * A bare name must belong to exactly one connected vendor (else 400 ambiguous_model).
 */
function resolveModel(model: string, input: PlanInput): { parsed: ParsedModel; serving: Candidate[] } | null {
  let parsed = parseModel(model);
  const connections = input.config.connections;
  if (!parsed.kind) {
    const vendors = new Set<ProviderKind>();
    for (const c of connections) {
      if (c.modelMap[parsed.name] || knowsModel(input, c.kind, parsed.name)) vendors.add(c.kind);
    }
    if (vendors.size > 1) {
      throw new GatewayError('ambiguous_model', `\`${model}\` is served by several connected vendors (${[...vendors].sort().join(', ')}); name it as \`<vendor>/${model}\`.`);
    }
    const [vendor] = [...vendors];
    if (!vendor) return null;
    parsed = { kind: vendor, name: parsed.name, id: `${vendor}/${parsed.name}` };
  }
  const mapped = connections.some((c) => c.modelMap[parsed.id] || c.modelMap[parsed.name]);
  const customerNamed = kindSpec(parsed.kind!).takesModelMap;
  if (input.catalogModelsOnly && !mapped && !customerNamed && !knowsModel(input, parsed.kind!, parsed.name)) return null;
  const serving: Candidate[] = [];
  for (const c of connections) {
    const upstreamModel = upstreamNameFor(c, parsed);
    if (upstreamModel) serving.push({ connection: c, upstreamModel, modelId: parsed.id, fallback: false });
  }
  return { parsed, serving };
}

/** The allowlists that apply to a key: its own, its project's, its organization's (empty ones allow all). */
function allowlistsOf(key: KeyContext, config: OrgConfig): string[][] {
  return [key.modelAllowlist, key.projectModelAllowlist, config.modelAllowlist].filter((l) => l.length > 0);
}

/**
 * Whether every allowlist that applies lets the key call this model (`<vendor>/<name>` or the
 * bare name). Reached through a route, a list that names the route's slug also allows it:
 * whoever wrote that list allowed the route as its owner configured it.
 */
export function modelAllowed(key: KeyContext, config: OrgConfig, modelId: string, routeSlug?: string): boolean {
  const name = modelId.slice(modelId.indexOf('/') + 1);
  return allowlistsOf(key, config).every((list) => list.includes(modelId) || list.includes(name) || (routeSlug !== undefined && list.includes(routeSlug)));
}

function checkModelAllowed(parsed: ParsedModel, input: PlanInput): void {
  if (!modelAllowed(input.key, input.config, parsed.id)) {
    throw new GatewayError('model_not_allowed', `This key may not call \`${parsed.id}\`.`);
  }
}

/** Active connections share requests (in random order); standby ones come after every active one. */
function poolOrder(candidates: Candidate[], random: () => number): Candidate[] {
  const active = candidates.filter((c) => c.connection.poolRole === 'active');
  const standby = candidates.filter((c) => c.connection.poolRole === 'standby');
  return [...shuffled(active, random), ...shuffled(standby, random)];
}

/** Weighted order: each pick in proportion to the weight of what is left (default weight 1). */
function weightedOrder(targets: RouteTarget[], random: () => number): RouteTarget[] {
  const left = [...targets];
  const out: RouteTarget[] = [];
  while (left.length > 0) {
    const total = left.reduce((sum, t) => sum + (t.weight ?? 1), 0);
    let pick = random() * total;
    let index = left.findIndex((t) => (pick -= t.weight ?? 1) < 0);
    if (index < 0) index = left.length - 1;
    out.push(left.splice(index, 1)[0]!);
  }
  return out;
}

/**
 * A route rule applies when each entry of its `conditions` (an object of dotted request paths,
 * such as `metadata.tier`, to the value they must equal) holds. Rules stored in another shape
 * never apply; they are kept as given for the console.
 */
function ruleApplies(conditions: unknown, metadata: Record<string, unknown> | undefined): boolean {
  if (!conditions || typeof conditions !== 'object' || Array.isArray(conditions)) return false;
  return Object.entries(conditions as Record<string, unknown>).every(([path, expected]) => {
    const [root, ...rest] = path.split('.');
    if (root !== 'metadata') return false;
    let value: unknown = metadata;
    for (const part of rest) value = value && typeof value === 'object' ? (value as Record<string, unknown>)[part] : undefined;
    return value === expected;
  });
}

function routeCandidates(route: RouteConfig, input: PlanInput, random: () => number): Candidate[] {
  const order = (targets: RouteTarget[], strategy: RouteConfig['strategy']) => {
    const enabled = targets.filter((t) => t.enabled !== false);
    return strategy === 'weighted' ? weightedOrder(enabled, random) : enabled;
  };
  const targets: RouteTarget[] = [];
  let fallthrough = true;
  for (const rule of route.rules) {
    if (rule.enabled === false || !ruleApplies(rule.conditions, input.metadata)) continue;
    targets.push(...order(rule.targets, rule.strategy ?? route.strategy));
    fallthrough = rule.fallthrough === true;
    break;
  }
  if (fallthrough) targets.push(...order(route.targets, route.strategy));
  const byId = new Map(input.config.connections.map((c) => [c.id, c]));
  return targets.flatMap((t) => {
    const connection = byId.get(t.connection_id);
    return connection ? [{ connection, upstreamModel: connection.modelMap[t.model] ?? t.model, modelId: `${connection.kind}/${t.model}`, fallback: false }] : [];
  });
}

function outOfScope(model: string): GatewayError {
  return new GatewayError('connection_out_of_scope', `Connections serving \`${model}\` exist but none is within this key's or request's reach (environment, allowed providers, routing.providers).`);
}

/**
 * Every place a request may go, in order (spec 4.1): a route's matching rule and targets, or
 * the model's active then standby connections; then the fallbacks. Refusals here are the
 * gateway's own and are never retried elsewhere.
 */
export function planCandidates(input: PlanInput): Plan {
  const random = input.random ?? Math.random;
  checkProviderSelection(input.allow, input.deny);
  const route = input.config.routes.get(input.model) ?? null;

  // Fallback ids are checked even where they are ignored (route slugs).
  const fallbackModels = input.fallbacks.map((id) => {
    const resolved = resolveModel(id, input);
    const known = resolved !== null;
    if (!known) throw new GatewayError('unknown_fallback_model', `\`${id}\` in \`fallbacks\` is not a model this organization can call.`);
    return resolved;
  });

  if (route) {
    if (input.key.allowedRoutes.length > 0 && !input.key.allowedRoutes.includes(route.slug)) {
      throw new GatewayError('route_not_allowed', `This key may not call route \`${route.slug}\`.`);
    }
    const inEnvironment = route.environments.length === 0 || (input.key.environment !== null && route.environments.includes(input.key.environment));
    const all = routeCandidates(route, input, random);
    if (all.length === 0) throw new GatewayError('no_provider_connected', `Route \`${route.slug}\` has no target with a live connection.`);
    // A route is checked like a model: targets an allowlist excludes are skipped (issue 10).
    const allowed = all.filter((c) => modelAllowed(input.key, input.config, c.modelId, route.slug));
    if (allowed.length === 0) throw new GatewayError('model_not_allowed', `This key may not call any model of route \`${route.slug}\`.`);
    const candidates = inEnvironment ? allowed.filter((c) => reachable(c.connection, input)) : [];
    if (candidates.length === 0) throw outOfScope(route.slug);
    return { candidates, route, failover: route.failover, maxRetries: route.maxRetries, timeoutMs: route.timeoutMs };
  }
  if (input.key.allowedRoutes.length > 0) {
    throw new GatewayError('route_not_allowed', `This key is pinned to routes (${input.key.allowedRoutes.join(', ')}).`);
  }

  const resolved = resolveModel(input.model, input);
  if (!resolved) throw new GatewayError('model_not_found', `The model \`${input.model}\` does not exist or no connected vendor serves it.`);
  checkModelAllowed(resolved.parsed, input);
  if (resolved.serving.length === 0) throw new GatewayError('no_provider_connected', `No provider connection serves \`${resolved.parsed.id}\`.`);
  const primary = poolOrder(resolved.serving.filter((c) => reachable(c.connection, input)), random);
  if (primary.length === 0) throw outOfScope(resolved.parsed.id);

  const primaryModalities = input.catalog.lookup(resolved.parsed.kind!, resolved.parsed.name)?.outputModalities;
  const fallbacks = fallbackModels.flatMap((f) => {
    const modalities = f.parsed.kind ? input.catalog.lookup(f.parsed.kind, f.parsed.name)?.outputModalities : undefined;
    if (primaryModalities && modalities && modalities.join() !== primaryModalities.join()) return [];
    try {
      checkModelAllowed(f.parsed, input);
    } catch {
      return [];
    }
    return poolOrder(f.serving.filter((c) => reachable(c.connection, input)), random).map((c) => Object.assign({}, c, { fallback: true }));
  });
  return { candidates: [...primary, ...fallbacks], route: null, failover: DIRECT_FAILOVER, maxRetries: DIRECT_MAX_RETRIES, timeoutMs: null };
}
