import { Counter, Registry } from 'prom-client';
import { ConfigError, loadConfig } from '../../core/config';
import { describeOpsServer, startConfiguredOpsServer, temporalMetricsAddress, type OpsServer } from '../../core/observability/metrics';
import { freePort } from '../../scripts/lib/ports';
import { uniquePrefix } from '../helpers/harness';
import { listeningAddresses } from '../helpers/listening';
import { startWorkerProcess } from '../helpers/worker-process';

/**
 * The ops port and the Temporal SDK's metrics stay on this machine unless the operator says
 * otherwise (issue 52 item 5): their labels name tenants' models (a fine-tune id holds the
 * customer's provider organization) and their counters spend. GW_METRICS_TOKEN puts the ops
 * port behind a bearer token.
 */

const TOKEN = 'metrics-token-0123456789abcdef';

describe('where the metrics listen, and who may read them', () => {
  const started: OpsServer[] = [];
  const start = async (env: Record<string, string>) => {
    const registry = new Registry();
    new Counter({ name: 'ops_test_scrapes_total', help: 'A series a scrape shows.', registers: [registry] }).inc();
    const ops = (await startConfiguredOpsServer(registry, loadConfig({ GW_OPS_PORT: '0', ...env })))!;
    started.push(ops);
    return ops;
  };
  afterAll(async () => {
    await Promise.all(started.map((ops) => ops.close()));
  });

  it('listens on loopback by default, the ops port and the Temporal SDK\'s both', async () => {
    const config = loadConfig({ GW_OPS_PORT: '0', GW_TEMPORAL_METRICS_PORT: '9465' });
    expect([config.GW_OPS_HOST, config.GW_TEMPORAL_METRICS_HOST]).toEqual(['127.0.0.1', '127.0.0.1']);
    expect(temporalMetricsAddress(config)).toBe('127.0.0.1:9465');
    const ops = await start({});
    expect(ops.address).toBe('127.0.0.1');
    expect(listeningAddresses(ops.port)).toEqual(['127.0.0.1']);
    expect(describeOpsServer(ops, config).warning).toBeNull();
  });

  it('listens where the operator says, and warns when that is beyond this machine without a token', async () => {
    const config = loadConfig({ GW_OPS_PORT: '0', GW_OPS_HOST: '0.0.0.0', GW_TEMPORAL_METRICS_PORT: '9465', GW_TEMPORAL_METRICS_HOST: '::1' });
    expect(temporalMetricsAddress(config)).toBe('[::1]:9465');
    // Another loopback address, so that the test itself listens on no network.
    const ops = await start({ GW_OPS_HOST: '127.0.0.2' });
    expect(listeningAddresses(ops.port)).toEqual(['127.0.0.2']);
    expect(describeOpsServer(ops, config).warning).toBeNull();
    // Every interface, as GW_OPS_HOST=0.0.0.0 binds: a warning unless a token guards it.
    const everywhere = { ...ops, address: '0.0.0.0' };
    expect(describeOpsServer(everywhere, config).warning).toContain('GW_METRICS_TOKEN');
    expect(describeOpsServer(everywhere, { ...config, GW_METRICS_TOKEN: TOKEN }).warning).toBeNull();
    expect(describeOpsServer({ ...ops, address: '::' }, config).warning).toContain('GW_METRICS_TOKEN');
  });

  it('answers a scrape without the bearer token 401, and with it the metrics', async () => {
    const ops = await start({ GW_METRICS_TOKEN: TOKEN });
    const url = `http://127.0.0.1:${ops.port}/metrics`;
    for (const authorization of [undefined, 'Bearer wrong-token-0123456789abcdef', `Basic ${TOKEN}`, `Bearer ${TOKEN}x`, 'Bearer ']) {
      const res = await fetch(url, { headers: authorization ? { authorization } : {} });
      expect([authorization, res.status, res.headers.get('www-authenticate')]).toEqual([authorization, 401, 'Bearer realm="metrics"']);
      expect(await res.text()).not.toContain('ops_test_scrapes_total');
    }
    for (const authorization of [`Bearer ${TOKEN}`, `bearer ${TOKEN}`]) {
      const res = await fetch(url, { headers: { authorization } });
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('ops_test_scrapes_total 1');
    }
    // No token configured: scrapes are answered as before.
    const open = await start({});
    expect((await fetch(`http://127.0.0.1:${open.port}/metrics`)).status).toBe(200);
  });

  it('refuses a token too short to guard anything, or one a header cannot carry', () => {
    expect(() => loadConfig({ GW_METRICS_TOKEN: 'short' })).toThrow(ConfigError);
    expect(() => loadConfig({ GW_METRICS_TOKEN: 'has a space in it 0123456789' })).toThrow(/GW_METRICS_TOKEN/);
  });

  it('a worker process binds its ops port and the Temporal SDK\'s exporter to loopback unless told otherwise', async () => {
    const [opsPort, temporalPort] = [await freePort(), await freePort()];
    const worker = await startWorkerProcess('webhooks', uniquePrefix('ops-bind'), { GW_OPS_PORT: String(opsPort), GW_TEMPORAL_METRICS_PORT: String(temporalPort) });
    try {
      expect(listeningAddresses(opsPort)).toEqual(['127.0.0.1']);
      expect(listeningAddresses(temporalPort)).toEqual(['127.0.0.1']);
    } finally {
      await worker.stop();
    }
  });
});
