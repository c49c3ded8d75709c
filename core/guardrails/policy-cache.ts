import { and, eq, isNotNull } from 'drizzle-orm';
import { boundedCache } from '../bounded-cache';
import type { Database } from '../db/client';
import { gatewayKeys, orgSettings, projects, type GuardrailPolicy } from '../db/schema';
import type { DetectorRegistry } from './detectors';
import { policyPatternsTooLarge } from './rules';
import { compilePolicy, mergePolicies, type ActiveRules, type CompiledPolicy } from './engine';

/** An organization's guardrail policies, compiled; `applies` memoizes the merge per key. */
type OrgPolicies = {
  organization: CompiledPolicy | null;
  projects: Map<string, CompiledPolicy>;
  keys: Map<string, CompiledPolicy>;
  applies: Map<string, ActiveRules | null>;
};

/** Most organizations have no policy: they share this, and a request costs two lookups. */
const NONE: OrgPolicies = Object.freeze({ organization: null, projects: new Map(), keys: new Map(), applies: new Map() }) as OrgPolicies;

export type GuardrailKey = { orgId: string; projectId: string; keyId: string };

export type GuardrailPolicies = {
  /** The rules every enabled policy that applies to this key's requests adds up to, or null. */
  rulesFor(key: GuardrailKey): ActiveRules | null | Promise<ActiveRules | null>;
  clearOrg(orgId: string): void;
  clear(): void;
};

/**
 * The built-in detectors, loaded when the first policy is compiled: their packages (phone
 * metadata above all) cost about 3 MB of heap that a process whose organizations have no policy
 * never needs. A `require` rather than `import()`: tsx, Jest and the esbuild build all resolve
 * it without a file extension, and the build defers the module and its packages to this call.
 */
function builtinDetectors(): DetectorRegistry {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, see above
  return (require('./detectors') as typeof import('./detectors')).BUILTIN_DETECTORS;
}

/** Told of a stored policy whose patterns are past the bounds (written before them): its regex rules fail as engine errors. */
export type PastBounds = (past: { orgId: string; policy: string; reason: string }) => void;

async function loadOrgPolicies(db: Database, orgId: string, registry: () => DetectorRegistry, pastBounds?: PastBounds): Promise<OrgPolicies> {
  const [settingsRows, projectRows, keyRows] = await Promise.all([
    db.select({ policy: orgSettings.guardrailPolicy }).from(orgSettings).where(and(eq(orgSettings.id, orgId), isNotNull(orgSettings.guardrailPolicy))),
    db.select({ id: projects.id, policy: projects.guardrailPolicy }).from(projects).where(and(eq(projects.orgId, orgId), isNotNull(projects.guardrailPolicy))),
    db.select({ id: gatewayKeys.id, policy: gatewayKeys.guardrailPolicy }).from(gatewayKeys).where(and(eq(gatewayKeys.orgId, orgId), isNotNull(gatewayKeys.guardrailPolicy))),
  ]);
  // No policy anywhere (most organizations): nothing to compile, and no detector to load.
  if (!settingsRows[0]?.policy && !projectRows.some((r) => r.policy) && !keyRows.some((r) => r.policy)) return NONE;
  const detectors = registry();
  const compile = (policy: GuardrailPolicy, target: string) => {
    const past = pastBounds && policyPatternsTooLarge(policy.rules);
    if (past) pastBounds({ orgId, policy: target, reason: past });
    return compilePolicy(policy, detectors);
  };
  const compileAll = (rows: Array<{ id: string; policy: GuardrailPolicy | null }>, target: (id: string) => string) => {
    const compiled = new Map<string, CompiledPolicy>();
    for (const row of rows) {
      const policy = row.policy && compile(row.policy, target(row.id));
      if (policy) compiled.set(row.id, policy);
    }
    return compiled;
  };
  const organization = settingsRows[0]?.policy ? compile(settingsRows[0].policy, 'organization') : null;
  const byProject = compileAll(projectRows, (id) => `project:${id}`);
  const byKey = compileAll(keyRows, (id) => `key:${id}`);
  if (!organization && byProject.size === 0 && byKey.size === 0) return NONE;
  return { organization, projects: byProject, keys: byKey, applies: new Map() };
}

function rulesIn(policies: OrgPolicies, key: GuardrailKey): ActiveRules | null {
  if (policies === NONE) return null;
  const memo = policies.applies.get(key.keyId);
  if (memo !== undefined) return memo;
  const rules = mergePolicies([policies.organization, policies.projects.get(key.projectId) ?? null, policies.keys.get(key.keyId) ?? null]);
  policies.applies.set(key.keyId, rules);
  return rules;
}

/**
 * Guardrail policies kept in process per organization, compiled once (patterns, keyword
 * automata) and merged once per key. Like the routing config, any management write of the
 * organization clears its entry (Redis pub/sub, api/runtime.ts); the TTL only bounds how long
 * a missed message could keep a stale policy. A warm request reads no Postgres and, with no
 * policy, allocates nothing.
 */
export function createGuardrailPolicies(db: Database, options: { detectors?: DetectorRegistry; ttlMs?: number; max?: number; pastBounds?: PastBounds } = {}): GuardrailPolicies {
  const given = options.detectors;
  const detectors = given ? () => given : builtinDetectors;
  const cache = boundedCache<string, { loading: Promise<OrgPolicies>; value?: OrgPolicies }>(options.max ?? 10_000, { ttl: options.ttlMs ?? 60_000 });
  let generation = 0;

  function load(orgId: string): Promise<OrgPolicies> {
    const started = generation;
    const entry: { loading: Promise<OrgPolicies>; value?: OrgPolicies } = { loading: loadOrgPolicies(db, orgId, detectors, options.pastBounds) };
    cache.set(orgId, entry);
    // A failed load is not remembered, nor one a change overtook while it loaded.
    const forget = () => {
      if (cache.get(orgId) === entry) cache.delete(orgId);
    };
    entry.loading.then((value) => {
      if (generation !== started) forget();
      else entry.value = value;
    }, forget);
    return entry.loading;
  }

  return {
    rulesFor(key) {
      const entry = cache.get(key.orgId);
      if (entry?.value) return rulesIn(entry.value, key);
      return (entry?.loading ?? load(key.orgId)).then((policies) => rulesIn(policies, key));
    },
    clearOrg(orgId) {
      generation += 1;
      cache.delete(orgId);
    },
    clear() {
      generation += 1;
      cache.clear();
    },
  };
}
