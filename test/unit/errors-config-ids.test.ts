import { ConfigError, loadConfig } from '../../core/config';
import { ERROR_CATALOG, GatewayError, type ErrorKind } from '../../core/errors';
import { newId } from '../../core/ids';
import { clusterSeeds } from '../../core/redis';
import { scaleDuration } from '../../core/schedule';

describe('error catalog (spec 7)', () => {
  it.each<[ErrorKind, number, string, string | null]>([
    ['invalid_json', 400, 'invalid_request_error', 'invalid_json'],
    ['authentication', 401, 'authentication_error', null],
    ['key_budget', 402, 'budget_exceeded', 'key_budget'],
    ['key_disabled', 403, 'permission_denied', 'key_disabled'],
    ['model_not_found', 404, 'model_not_found', 'model_not_found'],
    ['resource_not_found', 404, 'not_found', 'resource_not_found'],
    ['stream_stalled', 408, 'request_timeout', 'stream_stalled'],
    ['version_conflict', 409, 'conflict', 'version_conflict'],
    ['request_too_large', 413, 'request_too_large', null],
    ['invalid_api_key_rate_limited', 429, 'rate_limit_exceeded', 'invalid_api_key_rate_limited'],
    ['internal_error', 500, 'internal_error', null],
    ['upstream_error', 502, 'upstream_error', null],
    ['connection_out_of_scope', 503, 'no_available_provider', 'connection_out_of_scope'],
  ])('%s is %d %s with code %s', (kind, status, type, code) => {
    const err = new GatewayError(kind, 'm');
    expect([err.status, err.type, err.code]).toEqual([status, type, code]);
    expect(err.toBody()).toEqual({ error: { message: 'm', type, code } });
  });

  it('keeps message, type and code authoritative over details', () => {
    const err = new GatewayError('organization_suspended', 'm', { details: { support_email: 's@x', type: 'spoof' } });
    expect(err.toBody().error).toEqual({ support_email: 's@x', message: 'm', type: 'permission_denied', code: 'organization_suspended' });
  });

  it('uses only the statuses spec 7 lists', () => {
    const statuses = new Set(Object.values(ERROR_CATALOG).map((e) => e.status));
    expect([...statuses].sort()).toEqual([400, 401, 402, 403, 404, 408, 409, 413, 429, 500, 502, 503]);
  });
});

describe('config', () => {
  it('defaults to a schedule scale of 1', () => {
    expect(loadConfig({}).GW_SCHEDULE_SCALE).toBe(1);
  });

  it('refuses a schedule scale other than 1 in production, in one line', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', GW_SCHEDULE_SCALE: '0.001' })).toThrow(ConfigError);
    expect(() => loadConfig({ NODE_ENV: 'production', GW_SCHEDULE_SCALE: '0.001' })).toThrow(/GW_SCHEDULE_SCALE/);
    expect(loadConfig({ NODE_ENV: 'development', GW_SCHEDULE_SCALE: '0.001' }).GW_SCHEDULE_SCALE).toBe(0.001);
    expect(loadConfig({ NODE_ENV: 'production', GW_SCHEDULE_SCALE: '1' }).GW_SCHEDULE_SCALE).toBe(1);
  });

  it('treats an empty variable as unset', () => {
    const config = loadConfig({ DATABASE_URL: '', PORT: '' });
    expect(config.DATABASE_URL).toBeUndefined();
    expect(config.PORT).toBe(8080);
  });

  it('names the bad setting', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(/^invalid configuration: PORT/);
  });

  it('takes one Redis URL, or several comma-separated as a cluster\'s seed nodes, and refuses what is neither', () => {
    expect(loadConfig({ REDIS_URL: 'redis://10.0.0.1:6379' }).REDIS_URL).toBe('redis://10.0.0.1:6379');
    const seeds = 'redis://10.0.0.1:7000, redis://10.0.0.2:7001,redis://10.0.0.3';
    expect(loadConfig({ REDIS_URL: seeds }).REDIS_URL).toBe(seeds);
    expect(clusterSeeds('redis://10.0.0.1:6379')).toBeNull();
    expect(clusterSeeds(seeds)).toEqual([{ host: '10.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7001 }, { host: '10.0.0.3', port: 6379 }]);
    expect(() => loadConfig({ REDIS_URL: 'redis://10.0.0.1:7000,not a url' })).toThrow(/REDIS_URL/);
  });

  it('scales durations, never below a millisecond', () => {
    expect(scaleDuration(86_400_000, 0.001)).toBe(86_400);
    expect(scaleDuration(10, 0.00001)).toBe(1);
  });
});

describe('ids', () => {
  it('carry their prefix and sort by creation time', () => {
    const a = newId('job', 1_700_000_000_000);
    const b = newId('job', 1_700_000_000_001);
    expect(a).toMatch(/^job_[0-9a-z]{25}$/);
    expect([b, a].sort()).toEqual([a, b]);
    expect(newId('evt')).not.toEqual(newId('evt'));
  });
});
