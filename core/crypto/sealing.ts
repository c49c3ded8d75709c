import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Sealed fields (provider credentials, webhook signing secrets): AES-256-GCM, bound by
 * associated data to the organization, the record and the field, so a sealed value copied
 * onto another row does not open. The key version travels with the ciphertext so the master
 * key can be rotated: new seals use the current key, old ones open with the key they name.
 *
 * Wire form of a sealed value: `v<version>.<iv>.<tag>.<ciphertext>` (base64url parts).
 */
export type Sealer = {
  readonly currentVersion: number;
  seal(plaintext: string, binding: SealBinding): string;
  open(sealed: string, binding: SealBinding): string;
};

export type SealBinding = { orgId: string; recordId: string; field: string };

export class SealingKeyError extends Error {}

const KEY_BYTES = 32;

function associatedData(b: SealBinding): Buffer {
  return Buffer.from(`${b.orgId}\u0000${b.recordId}\u0000${b.field}`, 'utf8');
}

/**
 * Parses a keyring `"<version>:<base64 key>[,<version>:<base64 key>...]"`; the first entry is
 * the current key. Each key is 32 random bytes (`openssl rand -base64 32`).
 */
export function parseKeyring(text: string): { current: number; keys: Map<number, Buffer> } {
  const keys = new Map<number, Buffer>();
  let current: number | undefined;
  for (const entry of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    const match = /^(\d{1,6}):(.+)$/.exec(entry);
    if (!match) throw new SealingKeyError('each entry must be <version>:<base64 of 32 bytes>');
    const version = Number(match[1]);
    const key = Buffer.from(match[2]!, 'base64');
    if (key.length !== KEY_BYTES) throw new SealingKeyError(`key version ${version} is not 32 bytes of base64`);
    if (keys.has(version)) throw new SealingKeyError(`key version ${version} appears twice`);
    keys.set(version, key);
    current ??= version;
  }
  if (current === undefined) throw new SealingKeyError('no key given');
  return { current, keys };
}

export function newKeyring(version = 1): string {
  return `${version}:${randomBytes(KEY_BYTES).toString('base64')}`;
}

export function createSealer(keyring: string): Sealer {
  const { current, keys } = parseKeyring(keyring);
  return {
    currentVersion: current,
    seal(plaintext, binding) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', keys.get(current)!, iv);
      cipher.setAAD(associatedData(binding));
      const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return ['v' + current, iv, cipher.getAuthTag(), ciphertext].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
    },
    open(sealed, binding) {
      const [tag, ivText, authTag, body] = sealed.split('.');
      const version = Number(tag?.slice(1));
      const key = keys.get(version);
      if (!tag?.startsWith('v') || !key || ivText === undefined || authTag === undefined || body === undefined) {
        throw new SealingKeyError(`cannot open a value sealed with key version ${tag ?? '?'}`);
      }
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(ivText, 'base64url'));
      decipher.setAAD(associatedData(binding));
      decipher.setAuthTag(Buffer.from(authTag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
    },
  };
}

/**
 * A key for another purpose (signing output links), derived from the current master key with
 * HKDF so one secret to keep covers both and the two uses never share key material.
 */
export function deriveKey(keyring: string, purpose: string): Buffer {
  return deriveKeys(keyring, purpose)[0]!;
}

/**
 * A purpose's keys from every master key, the current one's first: a signature is made with
 * the first and checked against each, so a link signed before a rotation, or by a process not
 * yet told of it (a rolling deploy), still verifies (issue 55).
 */
export function deriveKeys(keyring: string, purpose: string): Buffer[] {
  const { current, keys } = parseKeyring(keyring);
  const versions = [current, ...[...keys.keys()].filter((v) => v !== current)];
  return versions.map((v) => Buffer.from(hkdfSync('sha256', keys.get(v)!, Buffer.alloc(0), `gw:${purpose}`, KEY_BYTES)));
}

/** One key, or a purpose's keys (`deriveKeys`): signing uses the first, checking accepts any. */
export type SigningKeys = Buffer | readonly Buffer[];
export const signingKeyList = (keys: SigningKeys): readonly Buffer[] => (Buffer.isBuffer(keys) ? [keys] : keys);
