import type { KeyContext } from '../auth/gateway-key-auth';
import { embeddingModel, embeddingModelsOf } from '../catalog/embedding-models';
import type { ModelCatalog } from '../catalog/model-catalog';
import { kindSpec, type ProviderKind } from '../providers/kinds';
import { mediaAdapterFor } from '../providers/media';
import { modelAllowed } from './candidates';
import type { OrgConfig } from './org-config';

/** `embedding` models answer `/v1/embeddings`; `chat` ones the chat protocols. */
export type ModelType = 'chat' | 'embedding';
export type CallableModel = { id: string; owned_by: string; kind: 'model' | 'route'; type: ModelType };

/** Whether a name is an embedding model on a kind whose wire serves embeddings. */
function embeds(kind: ProviderKind, name: string): boolean {
  return mediaAdapterFor(kind, 'embeddings') !== null && embeddingModel(kind, name) !== null;
}

function inEnvironment(environments: string[], key: KeyContext): boolean {
  return environments.length === 0 || (key.environment !== null && environments.includes(key.environment));
}

/**
 * The models a key can call (spec 4.3): each `<vendor>/<model>` its reachable connections
 * serve (the catalog's list for the kind and the embedding models it serves, or the
 * connection's model map), and the routes it may name, narrowed by every allowlist that
 * applies; each says whether it embeds.
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
      const mapsOnly = mapped.length > 0 || kindSpec(c.kind).takesModelMap;
      const embedding = mediaAdapterFor(c.kind, 'embeddings') ? embeddingModelsOf(c.kind) : [];
      const names = mapsOnly ? mapped : [...catalog.modelsOf(c.kind), ...embedding];
      for (const name of names) {
        const id = name.includes('/') ? name : `${c.kind}/${name}`;
        // A mapped name embeds when it, or the deployment it maps to, is an embedding model.
        const type: ModelType = embeds(c.kind, name) || (c.modelMap[name] !== undefined && embeds(c.kind, c.modelMap[name]!)) ? 'embedding' : 'chat';
        if (allowed(id)) models.set(id, { id, owned_by: c.kind, kind: 'model', type });
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
    // A route embeds when every target it may send to is an embedding model.
    const type: ModelType = live.length > 0 && live.every((t) => embeds(byId.get(t.connection_id)!.kind, t.model)) ? 'embedding' : 'chat';
    models.set(route.slug, { id: route.slug, owned_by: 'route', kind: 'route', type });
  }
  return [...models.values()].sort((a, b) => a.id.localeCompare(b.id));
}
