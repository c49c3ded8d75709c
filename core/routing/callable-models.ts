import type { KeyContext } from '../auth/gateway-key-auth';
import type { ModelCatalog } from '../catalog/model-catalog';
import { kindSpec } from '../providers/kinds';
import { modelAllowed } from './candidates';
import type { OrgConfig } from './org-config';

export type CallableModel = { id: string; owned_by: string; kind: 'model' | 'route' };

function inEnvironment(environments: string[], key: KeyContext): boolean {
  return environments.length === 0 || (key.environment !== null && environments.includes(key.environment));
}

/**
 * The models a key can call (spec 4.3): each `<vendor>/<model>` its reachable connections
 * serve (the catalog's list for the kind, or the connection's model map), and the routes it
 * may name, narrowed by every allowlist that applies.
 */
export function callableModels(key: KeyContext, config: OrgConfig, catalog: ModelCatalog): CallableModel[] {
  const allowLists = [key.modelAllowlist, key.projectModelAllowlist, config.modelAllowlist].filter((l) => l.length > 0);
  const allowed = (id: string) => allowLists.every((l) => l.includes(id) || l.includes(id.slice(id.indexOf('/') + 1)));
  const models = new Map<string, CallableModel>();
  if (key.allowedRoutes.length === 0) {
    for (const c of config.connections) {
      if (!c.enabled || !inEnvironment(c.environments, key)) continue;
      if (key.allowedProviders.length > 0 && !key.allowedProviders.includes(c.kind)) continue;
      const mapped = Object.keys(c.modelMap);
      const names = mapped.length > 0 || kindSpec(c.kind).takesModelMap ? mapped : catalog.modelsOf(c.kind);
      for (const name of names) {
        const id = name.includes('/') ? name : `${c.kind}/${name}`;
        if (allowed(id)) models.set(id, { id, owned_by: c.kind, kind: 'model' });
      }
    }
  }
  const byId = new Map(config.connections.map((c) => [c.id, c]));
  for (const route of config.routes.values()) {
    if (key.allowedRoutes.length > 0 && !key.allowedRoutes.includes(route.slug)) continue;
    if (!inEnvironment(route.environments, key)) continue;
    // A route whose every target an allowlist excludes cannot be called (403 model_not_allowed).
    const targets = [...route.targets, ...route.rules.flatMap((r) => r.targets)];
    const live = targets.filter((t) => t.enabled !== false && byId.has(t.connection_id));
    if (live.length > 0 && !live.some((t) => modelAllowed(key, config, `${byId.get(t.connection_id)!.kind}/${t.model}`, route.slug))) continue;
    models.set(route.slug, { id: route.slug, owned_by: 'route', kind: 'route' });
  }
  return [...models.values()].sort((a, b) => a.id.localeCompare(b.id));
}
