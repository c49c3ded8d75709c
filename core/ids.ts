import { randomFillSync } from 'node:crypto';

/** Every prefix the product hands out; ids sort by creation time within a prefix. */
export const ID_PREFIXES = [
  'org', 'mem', 'env', 'proj', 'key', 'mtok', 'conn', 'route', 'job', 'evt', 'whd', 'whep',
  'price', 'aud', 'req', 'spend', 'nch', 'nrule', 'bcross', 'eucap', 'file', 'mcps', 'mcpt', 'mcpg', 'fnd', 'ccen', 'cmt', 'ccr', 'ccrv', 'dpol', 'dec', 'nsend', 'batch', 'msgbatch', 'breq',
] as const;
export type IdPrefix = (typeof ID_PREFIXES)[number];

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

const RANDOM_CHARS = 16;
/**
 * Random bytes are drawn from the system in blocks and handed out 16 at a time: one system
 * call per 256 ids instead of one per id (each request makes several).
 */
const pool = Buffer.alloc(RANDOM_CHARS * 256);
let offset = pool.length;

function randomChars(): string {
  if (offset + RANDOM_CHARS > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  let out = '';
  for (let i = offset; i < offset + RANDOM_CHARS; i++) out += ALPHABET[pool[i]! % 36];
  offset += RANDOM_CHARS;
  return out;
}

/**
 * `<prefix>_<time><random>`: 9 base-36 characters of milliseconds (good until year 5188) then
 * 16 random ones (~82 bits), so lexical order is creation order and guessing is hopeless.
 */
export function newId(prefix: IdPrefix, now: number = Date.now()): string {
  return `${prefix}_${now.toString(36).padStart(9, '0')}${randomChars()}`;
}
