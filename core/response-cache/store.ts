import { promisify } from 'node:util';
import { deflateRaw, inflateRaw } from 'node:zlib';
import type { RedisClient } from '../redis';
import type { CachedAnswer, CachedServing } from './answer';

const deflate = promisify(deflateRaw);
const inflate = promisify(inflateRaw);

/** Stored values above this many bytes are compressed (a first byte says which form follows). */
export const COMPRESS_ABOVE_BYTES = 4096;
const PLAIN = 0x6a; // 'j'
const DEFLATED = 0x7a; // 'z'

/** Redis could not be asked: the request is served uncached, or refused if it demanded `read_only`. */
export class ResponseCacheUnavailable extends Error {}

/**
 * Kept answers by key. An entry's shape is its endpoint's (chat's CachedAnswer, or an
 * embeddings answer): the key says which, since each endpoint hashes its own requests.
 */
export type ResponseCacheStore = {
  get<E extends CachedServing = CachedAnswer>(key: string): Promise<E | null>;
  put(key: string, answer: CachedServing, ttlSeconds: number): Promise<void>;
};

export function encodeAnswer(answer: CachedServing): Promise<Buffer> | Buffer {
  const json = Buffer.from(JSON.stringify(answer));
  if (json.length <= COMPRESS_ABOVE_BYTES) return Buffer.concat([Buffer.of(PLAIN), json]);
  return deflate(json).then((z) => Buffer.concat([Buffer.of(DEFLATED), z]));
}

export async function decodeAnswer<E extends CachedServing = CachedAnswer>(stored: Buffer): Promise<E | null> {
  const body = stored.subarray(1);
  if (stored[0] === PLAIN) return JSON.parse(body.toString('utf8')) as E;
  if (stored[0] === DEFLATED) return JSON.parse((await inflate(body)).toString('utf8')) as E;
  return null;
}

/**
 * The response cache in Redis. While Redis is not connected a read fails at once (no waiting
 * through the client's reconnect attempts on the hot path) with ResponseCacheUnavailable.
 */
export function createResponseCacheStore(redis: RedisClient): ResponseCacheStore {
  const unavailable = (err?: unknown) => new ResponseCacheUnavailable('The response cache is unavailable.', { cause: err });
  return {
    async get<E extends CachedServing = CachedAnswer>(key: string) {
      if (redis.status !== 'ready') throw unavailable();
      let stored: Buffer | null;
      try {
        stored = await redis.getBuffer(key);
      } catch (err) {
        throw unavailable(err);
      }
      if (!stored) return null;
      // An entry this version cannot read is a miss, and is replaced by the next answer.
      return decodeAnswer<E>(stored).catch(() => null);
    },
    async put(key, answer, ttlSeconds) {
      if (redis.status !== 'ready') throw unavailable();
      await redis.set(key, await encodeAnswer(answer), 'EX', ttlSeconds);
    },
  };
}
