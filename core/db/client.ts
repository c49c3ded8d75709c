import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { Pool, type PoolClient } from 'pg';
import { withDependencyRetry } from '../transient';
import * as schema from './schema';

export type Database = NodePgDatabase<typeof schema>;
export type DatabaseHandle = { db: Database; pool: Pool; close(): Promise<void> };

/** A new connection waits at most this long for the server (or for a free slot in a full pool). */
export const DB_CONNECT_TIMEOUT_MS = 5_000;
/** A refused connection (server restarting) is tried again for this long before the error stands. */
export const DB_CONNECT_RETRY_MS = 2_000;

/** Refusals that say "not now" before anything was sent, so trying again is safe. */
const REFUSED = new Set(['ECONNREFUSED', 'ECONNRESET', 'EAI_AGAIN', '57P03']);
const refused = (err: unknown) => REFUSED.has((err as { code?: string }).code ?? '');

type ConnectCallback = (err: Error | undefined, client: PoolClient | undefined, done: (release?: unknown) => void) => void;

/**
 * A pool whose connection attempts ride out a short outage: a refused connect is tried again
 * for DB_CONNECT_RETRY_MS. Queries are never repeated; only connecting, before any is sent.
 * `pool.query` and drizzle's transactions both connect through here.
 */
class ResilientPool extends Pool {
  override connect(): Promise<PoolClient>;
  override connect(callback: ConnectCallback): void;
  override connect(callback?: ConnectCallback): Promise<PoolClient> | void {
    const attempt = () => super.connect();
    const connected = withDependencyRetry(attempt, { budgetMs: DB_CONNECT_RETRY_MS, retryIf: (err) => refused(err) && !this.ending });
    if (!callback) return connected;
    connected.then(
      (client) => callback(undefined, client, (release) => client.release(release as Error | boolean | undefined)),
      (err: Error) => callback(err, undefined, () => undefined),
    );
  }
}

export function connectDatabase(url: string, options: { max?: number; connectTimeoutMs?: number } = {}): DatabaseHandle {
  const pool = new ResilientPool({ connectionString: url, max: options.max ?? 10, connectionTimeoutMillis: options.connectTimeoutMs ?? DB_CONNECT_TIMEOUT_MS });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => undefined);
  const db = drizzle(pool, { schema });
  return { db, pool, close: () => pool.end() };
}

export type Transaction = Parameters<Parameters<Database['transaction']>[0]>[0];
/** Functions that can run alone or inside a caller's transaction take an Executor. */
export type Executor = Database | Transaction;
