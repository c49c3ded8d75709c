import { Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import { sql } from 'drizzle-orm';
import Redis from 'ioredis';
import { connectDatabase } from '../../core/db/client';
import { GatewayError } from '../../core/errors';
import { dependencyUnavailable, DEPENDENCY_RETRY_AFTER_SECONDS, isTransientDependencyError, transientDependency, withDependencyRetry } from '../../core/transient';
import { freePort } from '../../scripts/lib/ports';
import { testTemporalClient } from '../helpers/sealing-keys';

/** Real errors from each client, met against a loopback port where nothing listens. */
async function caught(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected a failure');
}

describe('transient dependency errors', () => {
  it('recognises Postgres being unreachable, through drizzle and directly', async () => {
    const database = connectDatabase(`postgres://postgres:postgres@127.0.0.1:${await freePort()}/none`, { max: 1 });
    try {
      const viaDrizzle = await caught(() => database.db.execute(sql`select 1`));
      expect(transientDependency(viaDrizzle)).toBe('postgres');
      const direct = await caught(() => database.pool.query('select 1'));
      expect(isTransientDependencyError(direct)).toBe(true);
    } finally {
      await database.close();
    }
  });

  it('recognises Postgres refusing connections while it starts or shuts down', () => {
    for (const code of ['57P01', '57P03', '08006']) {
      expect(transientDependency(Object.assign(new Error('x'), { code, severity: 'FATAL' }))).toBe('postgres');
    }
    expect(transientDependency(new Error('Connection terminated unexpectedly'))).toBe('postgres');
    expect(transientDependency(new Error('timeout exceeded when trying to connect'))).toBe('postgres');
    // A constraint violation is a defect or a conflict, not an outage.
    expect(transientDependency(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBeNull();
  });

  it('recognises Redis being unreachable', async () => {
    const redis = new Redis(`redis://127.0.0.1:${await freePort()}`, { maxRetriesPerRequest: 1, retryStrategy: () => 50, connectTimeout: 500 });
    redis.on('error', () => undefined);
    try {
      const err = await caught(() => redis.get('k'));
      expect((err as Error).name).toBe('MaxRetriesPerRequestError');
      expect(transientDependency(err)).toBe('redis');
    } finally {
      redis.disconnect();
    }
    expect(transientDependency(new Error('Connection is closed.'))).toBe('redis');
  });

  it('recognises Temporal answering UNAVAILABLE', async () => {
    const connection = await Connection.lazy({
      address: `127.0.0.1:${await freePort()}`,
      interceptors: [makeGrpcRetryInterceptor(defaultGrpcRetryOptions({ maxAttempts: 2 }))],
    });
    try {
      const client = testTemporalClient(connection);
      const err = await caught(() => client.workflow.start('nothing', { workflowId: 'w', taskQueue: 'q', args: [] }));
      expect(transientDependency(err)).toBe('temporal');
    } finally {
      await connection.close();
    }
  });

  it('leaves gateway errors and defects alone', () => {
    expect(transientDependency(new GatewayError('upstream_error', 'x'))).toBeNull();
    expect(transientDependency(new TypeError('undefined is not a function'))).toBeNull();
    expect(transientDependency('a string')).toBeNull();
  });

  it('renders 503 no_available_provider without a code and with Retry-After', () => {
    const err = dependencyUnavailable();
    expect([err.status, err.toBody().error.type, err.code]).toEqual([503, 'no_available_provider', null]);
    expect(err.headers).toEqual({ 'Retry-After': String(DEPENDENCY_RETRY_AFTER_SECONDS) });
  });

  it('retries a transient failure within its budget, and gives the last error up after it', async () => {
    let calls = 0;
    const refused = () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    await expect(withDependencyRetry(async () => {
      calls++;
      if (calls < 3) throw refused();
      return 'ok';
    }, { budgetMs: 5_000, initialDelayMs: 1 })).resolves.toBe('ok');
    expect(calls).toBe(3);

    calls = 0;
    await expect(withDependencyRetry(async () => {
      calls++;
      throw refused();
    }, { budgetMs: 50, initialDelayMs: 1 })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(calls).toBeGreaterThan(1);

    calls = 0;
    await expect(withDependencyRetry(async () => {
      calls++;
      throw new TypeError('defect');
    }, { budgetMs: 5_000 })).rejects.toThrow('defect');
    expect(calls).toBe(1);
  });
});
