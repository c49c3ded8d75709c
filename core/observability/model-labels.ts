import { embeddingModel } from '../catalog/embedding-models';
import type { ModelCatalog } from '../catalog/model-catalog';
import { mediaListRow, type MediaKind } from '../pricing/media-cost';
import type { ProviderKind } from '../providers/kinds';

/**
 * The model a metric may name (issue 52). A served model's name comes from the provider's answer
 * or from the client (a customer-named deployment, a self-hosted server echoing what it was
 * asked), so as a label it is unbounded: 20,000 names made 20,000 series per metric. A model is
 * named only when the catalog knows it or some connection's model map names it; any other is
 * `other`. The series cap (core/observability/series.ts) holds past that.
 *
 * On the request path this is a map lookup: each (kind, model) is decided once and remembered;
 * only a name not seen before asks the catalog (its price data is searched once a name, as
 * routing does for the names clients ask for).
 */

/** The label of a model no catalog and no model map names. */
export const OTHER_MODEL = 'other';
/**
 * Names remembered from model maps: far above what real configurations hold (a map takes 500
 * entries), so that no configuration's names are lost, and a bound on what a process keeps.
 */
export const MODEL_MAP_NAMES_MAX = 50_000;
/** Decisions remembered per provider kind; past it they are made again (a catalog memo hit each). */
const DECIDED_PER_KIND_MAX = 4_096;

const MEDIA_KINDS: readonly MediaKind[] = ['image', 'speech', 'transcription'];

/**
 * Whether the gateway's catalogs know a model: the chat catalog and its price data, the
 * embedding models' table and the media price tables (neither of which models.dev lists).
 */
export function catalogKnows(catalog: Pick<ModelCatalog, 'knows'>): (kind: string, model: string) => boolean {
  return (kind, model) =>
    catalog.knows(kind as ProviderKind, model)
    || embeddingModel(kind as ProviderKind, model) !== null
    || MEDIA_KINDS.some((media) => mediaListRow(media, { kind, model }) !== null);
}

export class ModelLabels {
  private readonly mapped = new Set<string>();
  private readonly decided = new Map<string, Map<string, string>>();

  constructor(private readonly knows: (kind: string, model: string) => boolean) {}

  /**
   * Takes the names an organization's connections map (both sides: what clients ask for and
   * what the provider is asked). Called as each organization's configuration loads; a name
   * stays known until the process ends, even after its map entry is removed.
   */
  learnModelMaps(connections: ReadonlyArray<{ modelMap: Readonly<Record<string, string>> }>): void {
    let added = false;
    for (const c of connections) {
      for (const from in c.modelMap) {
        for (const name of [from, c.modelMap[from]!]) {
          if (this.mapped.has(name) || this.mapped.size >= MODEL_MAP_NAMES_MAX) continue;
          this.mapped.add(name);
          added = true;
        }
      }
    }
    // A name decided `other` before its map was known is decided again.
    if (added) this.decided.clear();
  }

  /** The model as a metric names it: itself when known, else `other`. */
  label(kind: string, model: string): string {
    let memo = this.decided.get(kind);
    if (memo === undefined) this.decided.set(kind, (memo = new Map()));
    const known = memo.get(model);
    if (known !== undefined) return known;
    const label = this.mapped.has(model) || this.knows(kind, model) ? model : OTHER_MODEL;
    if (memo.size >= DECIDED_PER_KIND_MAX) memo.clear();
    memo.set(model, label);
    return label;
  }
}
