import type { Registry } from 'prom-client';

/**
 * Counters and histograms for the request path that prom-client's registry serves, kept as plain
 * numbers per series. prom-client's own metrics take a labels object on every observation, check
 * it against the label names and hash it to find the series: nine times a request, that was
 * about 17 µs of the ~34 µs the metrics cost (bench/results/2026-11-27-issue-36-traces.md). Here
 * a series is found by its label values in order, one map level per label, so an observation
 * builds no key string, no labels object and no closure: values that repeat are mostly the same
 * string objects (a provider kind, an endpoint), whose hashes V8 keeps. The labels object is
 * made once per series. The registry reads them at scrape time through the same `get()` its own
 * metrics answer, so the exposition, default labels and content type are prom-client's.
 *
 * A metric holds at most SERIES_PER_METRIC_MAX series (issue 52): past it, an observation of a
 * new combination of label values goes to one series whose every label is `other`. Its callers
 * keep their labels to bounded sets first (core/observability/model-labels.ts for model names);
 * the cap is what holds when a set turns out larger than thought.
 */

type Labels = Record<string, string>;
type Value = { labels: Record<string, string | number>; value: number; metricName?: string };
type Entry<S> = { labels: Labels; state: S };
/** A level of the series tree: label value to the next level, or to the series at the last label. */
type Level<S> = Map<string, Level<S> | Entry<S>>;

/**
 * The most series one metric keeps. The request metrics' labels are bounded sets, a few hundred
 * combinations in a real deployment (endpoints x statuses x provider kinds in use; operations x
 * kinds x models served x token types), so the cap folds nothing a deployment serves. At the
 * cap, with both model histograms full (15 and 21 lines a series), the exposition is about
 * 6.6 MB and a scrape about 110 ms on this 2-core machine; 20,000 series of tenant-chosen model
 * names made a scrape block the event loop for seconds (about 9 s in the issue's measure), and it
 * failed past about 25,000.
 */
export const SERIES_PER_METRIC_MAX = 1_000;
/** The value of every label of the series that observations past the cap go to. */
export const FOLDED_LABEL = 'other';
/**
 * Series a metric may make past the cap for observations whose open labels (the ones tenants'
 * input reaches, `open` below) are folded to `other` while the rest, small fixed sets, are kept:
 * operation, provider and token type stay readable when models fold. Past this many more, the
 * all-`other` series takes what is left.
 */
export const FOLDED_SERIES_MAX = 200;

/** A series metric's settings: its cap, and which labels fold to `other` past it (the rest keep their values). */
export type SeriesOptions = { maxSeries?: number; open?: readonly string[] };

abstract class Series<S> {
  private readonly tree: Level<S> = new Map();
  protected readonly entries: Array<Entry<S>> = [];
  /** The series of observations past the cap, made the first time one is. */
  private folded: Entry<S> | null = null;

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'histogram',
    private readonly labelNames: readonly string[],
    /** Runs before the registry reads the series: observations the caller holds back are made then. */
    private readonly beforeRead?: () => void,
    options: SeriesOptions = {},
  ) {
    if (labelNames.length === 0) throw new Error(`${name}: a series metric needs at least one label`);
    this.maxSeries = options.maxSeries ?? SERIES_PER_METRIC_MAX;
    this.open = (options.open ?? []).map((label) => labelNames.indexOf(label));
    if (this.open.includes(-1)) throw new Error(`${name}: an open label is not one of its labels`);
    registry.registerMetric(this as never);
  }

  private readonly maxSeries: number;
  /** The positions of the labels that fold to `other` past the cap. */
  private readonly open: readonly number[];

  protected abstract init(): S;

  /** The series of these label values, in the order of the label names (made the first time). */
  protected stateOf(a: string, b?: string, c?: string, d?: string): S {
    // Found without making anything: past the cap, a new combination must not grow the tree.
    const depth = this.labelNames.length;
    let level: Level<S> | undefined = this.tree;
    for (let i = 0; i < depth - 1 && level !== undefined; i++) level = level.get(i === 0 ? a : i === 1 ? b! : c!) as Level<S> | undefined;
    const entry = level?.get(depth === 1 ? a : depth === 2 ? b! : depth === 3 ? c! : d!) as Entry<S> | undefined;
    return entry !== undefined ? entry.state : this.newSeries([a, b, c, d]);
  }

  /**
   * A series for label values not seen before. Once the metric holds its most: the series with
   * its open labels folded to `other` (within FOLDED_SERIES_MAX more), else the all-`other` one.
   */
  private newSeries(values: ReadonlyArray<string | undefined>): S {
    if (this.entries.length < this.maxSeries) return this.make(values).state;
    if (this.open.length > 0) {
      const folded = values.map((v, i) => (this.open.includes(i) ? FOLDED_LABEL : v));
      const found = this.find(folded);
      if (found) return found.state;
      if (this.entries.length < this.maxSeries + FOLDED_SERIES_MAX) return this.make(folded).state;
    }
    return (this.folded ??= this.keep(this.labelNames.map(() => FOLDED_LABEL))).state;
  }

  private find(values: ReadonlyArray<string | undefined>): Entry<S> | undefined {
    let level: Level<S> | undefined = this.tree;
    for (let i = 0; i < this.labelNames.length - 1 && level !== undefined; i++) level = level.get(values[i]!) as Level<S> | undefined;
    return level?.get(values[this.labelNames.length - 1]!) as Entry<S> | undefined;
  }

  /** A series made and placed in the tree. */
  private make(values: ReadonlyArray<string | undefined>): Entry<S> {
    let level = this.tree;
    for (let i = 0; i < this.labelNames.length - 1; i++) {
      let next = level.get(values[i]!) as Level<S> | undefined;
      if (next === undefined) level.set(values[i]!, (next = new Map()));
      level = next;
    }
    const entry = this.keep(values);
    level.set(values[this.labelNames.length - 1]!, entry);
    return entry;
  }

  private keep(values: ReadonlyArray<string | undefined>): Entry<S> {
    const labels: Labels = {};
    this.labelNames.forEach((name, i) => (labels[name] = values[i]!));
    const entry = { labels, state: this.init() };
    this.entries.push(entry);
    return entry;
  }

  readonly aggregator = 'sum';

  reset(): void {
    this.tree.clear();
    this.entries.length = 0;
    this.folded = null;
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Value[] }> {
    this.beforeRead?.();
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.values() };
  }

  protected abstract values(): Value[];
}

export class SeriesCounter extends Series<{ value: number }> {
  constructor(registry: Registry, name: string, help: string, labelNames: readonly string[], beforeRead?: () => void, options?: SeriesOptions) {
    super(registry, name, help, 'counter', labelNames, beforeRead, options);
  }

  protected init() {
    return { value: 0 };
  }

  /** Adds `by` to the series of these label values (in the order of the label names). */
  add(by: number, a: string, b?: string, c?: string, d?: string): void {
    this.stateOf(a, b, c, d).value += by;
  }

  protected values(): Value[] {
    return this.entries.map((s) => ({ labels: s.labels, value: s.state.value }));
  }
}

export class SeriesHistogram extends Series<{ counts: Float64Array; sum: number; count: number }> {
  constructor(registry: Registry, name: string, help: string, private readonly buckets: readonly number[], labelNames: readonly string[], beforeRead?: () => void, options?: SeriesOptions) {
    super(registry, name, help, 'histogram', labelNames, beforeRead, options);
  }

  protected init() {
    return { counts: new Float64Array(this.buckets.length), sum: 0, count: 0 };
  }

  /** Observes `value` in the series of these label values (in the order of the label names). */
  observe(value: number, a: string, b?: string, c?: string, d?: string): void {
    const s = this.stateOf(a, b, c, d);
    for (let i = 0; i < this.buckets.length; i++) {
      if (value <= this.buckets[i]!) {
        s.counts[i]! += 1;
        break;
      }
    }
    s.sum += value;
    s.count += 1;
  }

  protected values(): Value[] {
    const out: Value[] = [];
    for (const { labels, state } of this.entries) {
      let cumulative = 0;
      for (let i = 0; i < this.buckets.length; i++) {
        cumulative += state.counts[i]!;
        out.push({ labels: { ...labels, le: this.buckets[i]! }, value: cumulative, metricName: `${this.name}_bucket` });
      }
      out.push({ labels: { ...labels, le: '+Inf' }, value: state.count, metricName: `${this.name}_bucket` });
      out.push({ labels, value: state.sum, metricName: `${this.name}_sum` });
      out.push({ labels, value: state.count, metricName: `${this.name}_count` });
    }
    return out;
  }
}
