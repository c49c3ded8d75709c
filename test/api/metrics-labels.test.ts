import { loadModelCatalog } from '../../core/catalog/model-catalog';
import { createGatewayMetrics } from '../../core/observability/metrics';
import { catalogKnows, OTHER_MODEL } from '../../core/observability/model-labels';
import { FOLDED_LABEL, SERIES_PER_METRIC_MAX } from '../../core/observability/series';
import type { RequestLogEntry } from '../../core/request-log/writer';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';

/**
 * Bounded metric labels (issue 52 item 4). A served model's name comes from the provider's
 * answer or the client, so tenants choose it: 20,000 names made 20,000 series a metric, a scrape
 * that blocked the event loop for seconds, and one that failed past about 25,000. A model is
 * named only when a catalog or a connection's model map knows it (others are `other`), and no
 * metric holds more than SERIES_PER_METRIC_MAX series.
 */

const DISTINCT_NAMES = 20_000;
/** The gen_ai metrics of a handful of models are a few kilobytes; 20,000 names' were tens of megabytes. */
const SMALL_SCRAPE_BYTES = 200_000;

/** A served chat request's row, as the request log records it. */
function servedRow(provider: string, servedModel: string): RequestLogEntry {
  return {
    endpoint: 'chat.completions', provider, status: 200, latencyMs: 5, servedModel, priceSource: 'list', cost: 0.0001,
    usage: { prompt_tokens: 3, completion_tokens: 4 }, attempts: [{ provider, outcome: 'ok', latency_ms: 3 }],
  } as unknown as RequestLogEntry;
}

type Sample = { labels: Record<string, string>; value: number };

/** One metric's samples in Prometheus's text format (no escaping in these labels). */
function samplesOf(text: string, metric: string): Sample[] {
  return text.split('\n').filter((l) => l.startsWith(`${metric}{`)).map((line) => {
    const labels: Record<string, string> = {};
    for (const pair of line.slice(line.indexOf('{') + 1, line.lastIndexOf('}')).matchAll(/(\w+)="([^"]*)"/g)) labels[pair[1]!] = pair[2]!;
    return { labels, value: Number(line.slice(line.lastIndexOf(' ') + 1)) };
  });
}

/** The values one label takes among samples. */
const valuesOf = (samples: Sample[], label: string) => [...new Set(samples.map((s) => s.labels[label]))].sort();
/** The sum of the samples whose labels include these. */
const sumOf = (samples: Sample[], labels: Record<string, string>) =>
  samples.filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((n, s) => n + s.value, 0);

describe('metric labels stay bounded whatever models tenants name', () => {
  it('names only models a catalog or a model map knows: 20,000 other names are one `other` series', async () => {
    const metrics = createGatewayMetrics('gw-api', catalogKnows(await loadModelCatalog()));
    metrics.learnModelMaps([{ modelMap: { 'my-fine-tune': 'ft:gpt-4o-mini:acme::abc123' } }]);
    for (let i = 0; i < DISTINCT_NAMES; i++) metrics.observeRequest(servedRow('openai', `tenant-model-${i}`));
    // The provider's dated name, the catalog's own and a mapped fine-tune keep their names.
    for (const model of ['gpt-4o-mini', 'gpt-4o-mini-2024-07-18', 'ft:gpt-4o-mini:acme::abc123']) metrics.observeRequest(servedRow('openai', model));

    const text = await metrics.registry.metrics();
    const tokens = samplesOf(text, 'gen_ai_client_token_usage_count');
    expect(valuesOf(tokens, 'gen_ai_response_model')).toEqual(['ft:gpt-4o-mini:acme::abc123', 'gpt-4o-mini', 'gpt-4o-mini-2024-07-18', OTHER_MODEL]);
    // Four models, input and output each.
    expect(tokens).toHaveLength(8);
    expect(samplesOf(text, 'gen_ai_client_operation_duration_seconds_count')).toHaveLength(4);
    expect(Buffer.byteLength(text)).toBeLessThan(SMALL_SCRAPE_BYTES);
    // Every row is still counted: the 20,000 under `other`.
    expect(sumOf(tokens, { gen_ai_response_model: OTHER_MODEL, gen_ai_token_type: 'input' })).toBe(DISTINCT_NAMES);
  });

  it('folds new series into one `other` series past the cap, when every name is known', async () => {
    // 20,000 names that model maps hold (a configuration far beyond any real one): each is known.
    const metrics = createGatewayMetrics('gw-api', () => false);
    const names = Array.from({ length: DISTINCT_NAMES }, (_, i) => `mapped-model-${i}`);
    metrics.learnModelMaps([{ modelMap: Object.fromEntries(names.map((n) => [n, n])) }]);
    for (const name of names) metrics.observeRequest(servedRow('openai', name));

    const text = await metrics.registry.metrics();
    const operation = samplesOf(text, 'gen_ai_client_operation_duration_seconds_count');
    // At most the cap, and the one series past it, whose every label is `other`.
    expect(operation).toHaveLength(SERIES_PER_METRIC_MAX + 1);
    const folded = { gen_ai_operation_name: FOLDED_LABEL, gen_ai_provider_name: FOLDED_LABEL, gen_ai_response_model: FOLDED_LABEL };
    expect(sumOf(operation, folded)).toBe(DISTINCT_NAMES - SERIES_PER_METRIC_MAX);
    expect(samplesOf(text, 'gen_ai_client_token_usage_count')).toHaveLength(SERIES_PER_METRIC_MAX + 1);
    // The whole exposition at the cap: both model metrics full, about 6.6 MB (series.ts).
    expect(Buffer.byteLength(text)).toBeLessThan(8_000_000);
  });

  describe('through the gateway', () => {
    let f: ChatFixture;
    let secret: string;

    beforeAll(async () => {
      f = await startChatFixture({ GW_OPS_PORT: '0' });
      await f.connect('openai', { extra: { model_map: { 'acme-tuned': 'ft:gpt-4o-mini:acme::abc123' } } });
      // An Azure connection without a map serves any deployment the client names, and answers with its name.
      await f.connect('azure_openai');
      secret = await f.key();
    });
    afterAll(async () => {
      await f?.close();
    });

    it('labels the model served by name only when a catalog or the model map knows it', async () => {
      const hello = [{ role: 'user', content: 'Say hello' }];
      const invented = Array.from({ length: 5 }, (_, i) => `azure_openai/tenant-deployment-${i}`);
      for (const model of ['openai/gpt-4o-mini', 'acme-tuned', ...invented]) {
        const res = await f.chat(secret, { model, messages: hello });
        expect([model, res.status]).toEqual([model, 200]);
      }
      // The sandbox answered with the names it was asked for.
      const text = await f.api.runtime.metrics!.registry.metrics();
      const served = samplesOf(text, 'gen_ai_client_operation_duration_seconds_count');
      expect(valuesOf(served, 'gen_ai_response_model')).toEqual(['ft:gpt-4o-mini:acme::abc123', 'gpt-4o-mini', OTHER_MODEL]);
      expect(sumOf(served, { gen_ai_provider_name: 'azure_openai', gen_ai_response_model: OTHER_MODEL })).toBe(invented.length);
    });
  });
});
