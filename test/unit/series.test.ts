import { Registry } from 'prom-client';
import { SeriesCounter, SeriesHistogram } from '../../core/observability/series';

/** The request path's counters and histograms, kept as plain numbers and served by prom-client's registry (issue 36). */
describe('series metrics', () => {
  it('keeps one series per combination of label values, whatever position a value is at', async () => {
    const registry = new Registry();
    const counter = new SeriesCounter(registry, 't_requests_total', 'help', ['a', 'b', 'c']);
    counter.add(1, 'x', 'y', 'z');
    counter.add(1, 'y', 'x', 'z');
    counter.add(2, 'x', 'y', 'w');
    counter.add(1, 'x', 'y', 'z');
    counter.add(0.5, 'x', String(200), 'z');
    const text = await registry.metrics();
    expect(text.split('\n').filter((l) => l.startsWith('t_requests_total')).sort()).toEqual([
      't_requests_total{a="x",b="200",c="z"} 0.5',
      't_requests_total{a="x",b="y",c="w"} 2',
      't_requests_total{a="x",b="y",c="z"} 2',
      't_requests_total{a="y",b="x",c="z"} 1',
    ]);
  });

  it('makes the observations held back before the registry reads a series', async () => {
    const registry = new Registry();
    const held: string[] = [];
    const counter: SeriesCounter = new SeriesCounter(registry, 't_held_total', 'help', ['endpoint'], () => {
      for (const endpoint of held.splice(0)) counter.add(1, endpoint);
    });
    held.push('chat', 'chat', 'embeddings');
    const read = async () => (await registry.metrics()).split('\n').filter((l) => l.startsWith('t_held_total')).sort();
    expect(await read()).toEqual(['t_held_total{endpoint="chat"} 2', 't_held_total{endpoint="embeddings"} 1']);
    expect(await read()).toEqual(['t_held_total{endpoint="chat"} 2', 't_held_total{endpoint="embeddings"} 1']);
  });

  it('counts a histogram\'s observations into cumulative buckets, per series', async () => {
    const registry = new Registry();
    const histogram = new SeriesHistogram(registry, 't_seconds', 'help', [0.1, 1], ['endpoint']);
    histogram.observe(0.05, 'chat');
    histogram.observe(0.5, 'chat');
    histogram.observe(5, 'chat');
    histogram.observe(1, 'embeddings');
    const lines = (await registry.metrics()).split('\n').filter((l) => l.startsWith('t_seconds'));
    expect(lines).toEqual([
      't_seconds_bucket{endpoint="chat",le="0.1"} 1',
      't_seconds_bucket{endpoint="chat",le="1"} 2',
      't_seconds_bucket{endpoint="chat",le="+Inf"} 3',
      't_seconds_sum{endpoint="chat"} 5.55',
      't_seconds_count{endpoint="chat"} 3',
      't_seconds_bucket{endpoint="embeddings",le="0.1"} 0',
      't_seconds_bucket{endpoint="embeddings",le="1"} 1',
      't_seconds_bucket{endpoint="embeddings",le="+Inf"} 1',
      't_seconds_sum{endpoint="embeddings"} 1',
      't_seconds_count{endpoint="embeddings"} 1',
    ]);
    histogram.reset();
    expect((await registry.metrics()).split('\n').filter((l) => l.startsWith('t_seconds'))).toEqual([]);
  });
});
