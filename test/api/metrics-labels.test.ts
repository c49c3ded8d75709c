import { loadModelCatalog } from '../../core/catalog/model-catalog';
import { createGatewayMetrics } from '../../core/observability/metrics';
import { catalogNames, NEW_LABELS_PER_ORGANIZATION, OTHER_MODEL } from '../../core/observability/model-labels';
import { FOLDED_LABEL, FOLDED_SERIES_MAX, SERIES_PER_METRIC_MAX } from '../../core/observability/series';
import type { RequestLogEntry } from '../../core/request-log/writer';
import { startChatFixture, type ChatFixture } from '../helpers/chat-fixture';

/**
 * Bounded metric labels (issue 52 item 4). A served model's name comes from the provider's
 * answer or the client, so tenants choose it: 20,000 names made 20,000 series a metric, a scrape
 * that blocked the event loop for seconds, and one that failed past about 25,000. A model is
 * named only by a catalog's id or a name the organization's own model maps hold (others are
 * `other`), one organization brings at most NEW_LABELS_PER_ORGANIZATION new names, and no metric
 * holds more than SERIES_PER_METRIC_MAX series (then FOLDED_SERIES_MAX with the model `other`).
 */

const DISTINCT_NAMES = 20_000;
/** The gen_ai metrics of a handful of models are a few kilobytes; 20,000 names' were tens of megabytes. */
const SMALL_SCRAPE_BYTES = 200_000;

/** A served chat request's row, as the request log records it. */
function servedRow(provider: string, servedModel: string, orgId = 'org_a'): RequestLogEntry {
  return {
    orgId, endpoint: 'chat.completions', provider, status: 200, latencyMs: 5, servedModel, priceSource: 'list', cost: 0.0001,
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
  it('names only models a catalog or the organization\'s model map knows: 20,000 other names are one `other` series', async () => {
    const metrics = createGatewayMetrics('gw-api', catalogNames(await loadModelCatalog()));
    metrics.learnModelMaps('org_a', [{ modelMap: { 'my-fine-tune': 'ft:gpt-4o-mini:acme::abc123' } }]);
    for (let i = 0; i < DISTINCT_NAMES; i++) metrics.observeRequest(servedRow('openai', `tenant-model-${i}`));
    // Another organization's answer naming that fine-tune is not named by the first one's map.
    metrics.observeRequest(servedRow('openai', 'ft:gpt-4o-mini:acme::abc123', 'org_b'));
    // The catalog's own id and a fine-tune the organization maps keep their names.
    for (const model of ['gpt-4o-mini', 'ft:gpt-4o-mini:acme::abc123']) metrics.observeRequest(servedRow('openai', model));

    const text = await metrics.registry.metrics();
    const tokens = samplesOf(text, 'gen_ai_client_token_usage_count');
    expect(valuesOf(tokens, 'gen_ai_response_model')).toEqual(['ft:gpt-4o-mini:acme::abc123', 'gpt-4o-mini', OTHER_MODEL]);
    // Three models, input and output each.
    expect(tokens).toHaveLength(6);
    expect(samplesOf(text, 'gen_ai_client_operation_duration_seconds_count')).toHaveLength(3);
    expect(Buffer.byteLength(text)).toBeLessThan(SMALL_SCRAPE_BYTES);
    // Every row is still counted: the 20,000 and org_b's under `other`.
    expect(sumOf(tokens, { gen_ai_response_model: OTHER_MODEL, gen_ai_token_type: 'input' })).toBe(DISTINCT_NAMES + 1);
  });

  it('names a catalog\'s loose match by the catalog\'s id: 20,000 names a price pattern takes are a few series', async () => {
    const metrics = createGatewayMetrics('gw-api', catalogNames(await loadModelCatalog()));
    // A server behind the tenant's base URL answering with names the price data's patterns take.
    for (let i = 0; i < DISTINCT_NAMES; i++) metrics.observeRequest(servedRow('openai', `gpt-4o-mini-${i}`));
    const text = await metrics.registry.metrics();
    const models = valuesOf(samplesOf(text, 'gen_ai_client_operation_duration_seconds_count'), 'gen_ai_response_model');
    expect(models.length).toBeLessThan(10);
    expect(models.every((m) => !/^gpt-4o-mini-\d+$/.test(m!))).toBe(true);
  });

  it('charges new names to the organization that brings them: one cannot crowd another\'s models out', async () => {
    const metrics = createGatewayMetrics('gw-api', () => null);
    const many = Array.from({ length: 1_000 }, (_, i) => `crowd-${i}`);
    metrics.learnModelMaps('org_crowd', [{ modelMap: Object.fromEntries(many.map((n) => [n, n])) }]);
    metrics.learnModelMaps('org_quiet', [{ modelMap: { 'quiet-model': 'quiet-deployment' } }]);
    for (const name of many) metrics.observeRequest(servedRow('openai', name, 'org_crowd'));
    metrics.observeRequest(servedRow('openai', 'quiet-deployment', 'org_quiet'));
    const models = valuesOf(samplesOf(await metrics.registry.metrics(), 'gen_ai_client_operation_duration_seconds_count'), 'gen_ai_response_model');
    expect(models).toHaveLength(NEW_LABELS_PER_ORGANIZATION + 2);
    expect(models).toEqual(expect.arrayContaining(['quiet-deployment', OTHER_MODEL]));
  });

  it('past the cap, folds the model to `other` and keeps operation and provider, then one all-`other` series', async () => {
    // 200 organizations of 100 mapped names each, all known: 20,000 names, far beyond any real deployment.
    const metrics = createGatewayMetrics('gw-api', () => null);
    let rows = 0;
    for (let org = 0; org < 200; org++) {
      const names = Array.from({ length: NEW_LABELS_PER_ORGANIZATION }, (_, i) => `m-${org}-${i}`);
      metrics.learnModelMaps(`org_${org}`, [{ modelMap: Object.fromEntries(names.map((n) => [n, n])) }]);
      for (const name of names) {
        metrics.observeRequest(servedRow(org % 2 ? 'openai' : 'anthropic', name, `org_${org}`));
        rows += 1;
      }
    }
    const text = await metrics.registry.metrics();
    const operation = samplesOf(text, 'gen_ai_client_operation_duration_seconds_count');
    // The cap, and one series a provider with the model folded: operation and provider still say.
    expect(operation).toHaveLength(SERIES_PER_METRIC_MAX + 2);
    for (const provider of ['openai', 'anthropic']) {
      expect(operation).toContainEqual({ labels: expect.objectContaining({ gen_ai_operation_name: 'chat', gen_ai_provider_name: provider, gen_ai_response_model: FOLDED_LABEL }), value: expect.any(Number) });
    }
    expect(operation.reduce((n, s) => n + s.value, 0)).toBe(rows);
    expect(samplesOf(text, 'gen_ai_client_token_usage_count').length).toBeLessThanOrEqual(SERIES_PER_METRIC_MAX + FOLDED_SERIES_MAX + 1);
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
