import { boundedCache } from '../bounded-cache';
import { embeddingModel } from '../catalog/embedding-models';
import type { ModelCatalog } from '../catalog/model-catalog';
import { mediaListRow, type MediaKind } from '../pricing/media-cost';
import type { ProviderKind } from '../providers/kinds';

/**
 * The model a metric may name (issue 52). A served model's name comes from the provider's answer
 * or from the client (a customer-named deployment, a self-hosted server echoing what it was
 * asked, a server the tenant runs behind a base URL), so as a label it is unbounded: 20,000 names
 * made 20,000 series per metric. A model is named only by:
 *
 * - the catalog's own id for it (`catalogId`: the name when models.dev lists it, else the model
 *   the price data matched it to, so a dated snapshot or any name a price pattern takes is named
 *   by a finite set of ids), or the embedding and media tables' exact names;
 * - a name the serving organization's own connections map (`model_map`, either side): another
 *   organization's map names nothing here.
 *
 * Anything else is `other`. And one organization cannot crowd the others out of the series a
 * metric may hold (series.ts): a label value no request has brought in yet is charged to the
 * organization whose request brings it, at most NEW_LABELS_PER_ORGANIZATION each, then `other`.
 *
 * This runs as request-log rows are observed, a batch at a time, off the request's path; each
 * admitted (kind, name) is decided once and remembered.
 */

/** The label of a model no catalog and no model map of the organization names. */
export const OTHER_MODEL = 'other';
/** Label values one organization may bring into the metrics (names already in use cost nothing). */
export const NEW_LABELS_PER_ORGANIZATION = 100;
/** Names kept from one organization's model maps: a map takes 500 entries, a few connections have one. */
export const MODEL_MAP_NAMES_PER_ORGANIZATION = 5_000;
/** Organizations whose maps and charges are kept (least recently loaded or charged go first). */
const ORGANIZATIONS_KEPT = 10_000;
/** Label values admitted in all: far above what a deployment serves; past it, `other`. */
const LABELS_MAX = 10_000;
/** Decisions remembered per provider kind; past it they are made again. */
const DECIDED_PER_KIND_MAX = 4_096;

const MEDIA_KINDS: readonly MediaKind[] = ['image', 'speech', 'transcription'];

/** The catalog's name for a model of a kind, or null when no catalog knows it. */
export type CatalogNames = (kind: string, model: string) => string | null;

/** The chat catalog's ids and the embedding and media tables' names (which models.dev does not list). */
export function catalogNames(catalog: Pick<ModelCatalog, 'catalogId'>): CatalogNames {
  return (kind, model) =>
    catalog.catalogId(kind as ProviderKind, model)
    ?? (embeddingModel(kind as ProviderKind, model) !== null || MEDIA_KINDS.some((media) => mediaListRow(media, { kind, model }) !== null) ? model : null);
}

export class ModelLabels {
  private readonly mapped = boundedCache<string, ReadonlySet<string>>(ORGANIZATIONS_KEPT);
  private readonly charged = boundedCache<string, { count: number }>(ORGANIZATIONS_KEPT);
  private readonly admitted = new Set<string>();
  private readonly decided = new Map<string, Map<string, string>>();

  constructor(private readonly names: CatalogNames) {}

  /**
   * Takes the names an organization's connections map (both sides: what clients ask for and
   * what the provider is asked), in place of what it mapped before. Called as the organization's
   * configuration loads.
   */
  learnModelMaps(orgId: string, connections: ReadonlyArray<{ modelMap: Readonly<Record<string, string>> }>): void {
    const names = new Set<string>();
    for (const c of connections) {
      for (const from in c.modelMap) {
        if (names.size >= MODEL_MAP_NAMES_PER_ORGANIZATION) break;
        names.add(from);
        names.add(c.modelMap[from]!);
      }
    }
    if (names.size > 0 || this.mapped.has(orgId)) this.mapped.set(orgId, names);
  }

  /** The model as a metric names it for a request of `orgId`: a catalog's id or the organization's mapped name, else `other`. */
  label(orgId: string, kind: string, model: string): string {
    let memo = this.decided.get(kind);
    if (memo === undefined) this.decided.set(kind, (memo = new Map()));
    const known = memo.get(model);
    if (known !== undefined) return known;
    const name = this.names(kind, model) ?? (this.mapped.get(orgId)?.has(model) ? model : null);
    if (name === null || !this.admit(orgId, kind, name)) return OTHER_MODEL;
    if (memo.size >= DECIDED_PER_KIND_MAX) memo.clear();
    memo.set(model, name);
    return name;
  }

  /** Whether a label value may be used: one in use already, or a new one the organization still has room to bring. */
  private admit(orgId: string, kind: string, name: string): boolean {
    const key = `${kind}\u0000${name}`;
    if (this.admitted.has(key)) return true;
    if (this.admitted.size >= LABELS_MAX) return false;
    let charge = this.charged.get(orgId);
    if (charge === undefined) this.charged.set(orgId, (charge = { count: 0 }));
    if (charge.count >= NEW_LABELS_PER_ORGANIZATION) return false;
    charge.count += 1;
    this.admitted.add(key);
    return true;
  }
}
