import { randomBytes } from 'node:crypto';

/** Every prefix the product hands out; ids sort by creation time within a prefix. */
export const ID_PREFIXES = [
  'org', 'mem', 'env', 'proj', 'key', 'mtok', 'conn', 'route', 'job', 'evt', 'whd', 'whep',
  'price', 'aud', 'req', 'spend', 'nch', 'nrule', 'bcross', 'eucap',
] as const;
export type IdPrefix = (typeof ID_PREFIXES)[number];

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

function encode(bytes: Buffer): string {
  let out = '';
  for (const b of bytes) out += ALPHABET[b % 36];
  return out;
}

/**
 * `<prefix>_<time><random>`: 9 base-36 characters of milliseconds (good until year 5188) then
 * 16 random ones (~82 bits), so lexical order is creation order and guessing is hopeless.
 */
export function newId(prefix: IdPrefix, now: number = Date.now()): string {
  return `${prefix}_${now.toString(36).padStart(9, '0')}${encode(randomBytes(16))}`;
}
