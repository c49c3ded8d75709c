import type { Registry } from 'prom-client';

/**
 * Counters and histograms for the request path that prom-client's registry serves, kept as plain
 * numbers per series. prom-client's own metrics take a labels object on every observation, check
 * it against the label names and hash it to find the series: nine times a request, that was
 * about 17 µs of the ~34 µs the metrics cost (bench/results/2026-11-27-issue-36-traces.md). Here
 * the caller names the series by a key it builds from the label values it already holds, and the
 * labels object is made once per series. The registry reads them at scrape time through the same
 * `get()` its own metrics answer, so the exposition, default labels and content type are
 * prom-client's.
 */

type Labels = Record<string, string>;
type Value = { labels: Record<string, string | number>; value: number; metricName?: string };

abstract class Series<S> {
  protected readonly series = new Map<string, { labels: Labels; state: S }>();

  constructor(registry: Registry, readonly name: string, readonly help: string, readonly type: 'counter' | 'histogram') {
    registry.registerMetric(this as never);
  }

  protected stateOf(key: string, labels: () => Labels, init: () => S): S {
    let entry = this.series.get(key);
    if (!entry) {
      entry = { labels: labels(), state: init() };
      this.series.set(key, entry);
    }
    return entry.state;
  }

  readonly aggregator = 'sum';

  reset(): void {
    this.series.clear();
  }

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Value[] }> {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.values() };
  }

  protected abstract values(): Value[];
}

export class SeriesCounter extends Series<{ value: number }> {
  constructor(registry: Registry, name: string, help: string) {
    super(registry, name, help, 'counter');
  }

  /** Adds `by` (1 by default) to the series `key`, whose labels `labels()` makes the first time. */
  inc(key: string, labels: () => Labels, by = 1): void {
    this.stateOf(key, labels, () => ({ value: 0 })).value += by;
  }

  protected values(): Value[] {
    return [...this.series.values()].map((s) => ({ labels: s.labels, value: s.state.value }));
  }
}

export class SeriesHistogram extends Series<{ counts: Float64Array; sum: number; count: number }> {
  constructor(registry: Registry, name: string, help: string, private readonly buckets: readonly number[]) {
    super(registry, name, help, 'histogram');
  }

  observe(key: string, labels: () => Labels, value: number): void {
    const s = this.stateOf(key, labels, () => ({ counts: new Float64Array(this.buckets.length), sum: 0, count: 0 }));
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
    for (const { labels, state } of this.series.values()) {
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
