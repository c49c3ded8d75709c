import { createHash, randomBytes } from 'node:crypto';

/** Key secrets and management tokens are stored only as this hash. */
export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** A URL-safe random secret with a recognisable prefix (192 bits of randomness). */
export function newSecret(prefix: string): string {
  return `${prefix}${randomBytes(24).toString('base64url')}`;
}
