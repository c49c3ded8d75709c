import { signingKeyList, type SigningKeys } from '../crypto/sealing';
import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Signed output links (spec 2.1, 4.2 rule 4): `<path>/<id>?exp=<unix>&sig=<hex>`. For job
 * outputs (`/files/jobs`) `sig` is HMAC-SHA256 of `<job id>.<exp>`, the form links already handed
 * out carry; any other path (`/files/media`) signs `<path>/<id>.<exp>`, so a signature made for
 * one kind of file never opens another. No credential is needed to follow one; a wrong
 * signature or a passed `exp` answers 404.
 */
export type LinkSigner = {
  url(baseUrl: string, id: string, expiresAt: Date, path?: string): string;
  verify(id: string, exp: string | undefined, sig: string | undefined, now: Date, path?: string): boolean;
};

export const OUTPUT_LINK_PATH = '/files/jobs';

export function createLinkSigner(keys: SigningKeys): LinkSigner {
  const all = signingKeyList(keys);
  const signWith = (key: Buffer, path: string, id: string, exp: number) =>
    createHmac('sha256', key).update(path === OUTPUT_LINK_PATH ? `${id}.${exp}` : `${path}/${id}.${exp}`).digest('hex');
  const sign = (path: string, id: string, exp: number) => signWith(all[0]!, path, id, exp);
  return {
    url(baseUrl, id, expiresAt, path = OUTPUT_LINK_PATH) {
      const exp = Math.floor(expiresAt.getTime() / 1000);
      return `${baseUrl.replace(/\/+$/, '')}${path}/${id}?exp=${exp}&sig=${sign(path, id, exp)}`;
    },
    verify(id, exp, sig, now, path = OUTPUT_LINK_PATH) {
      if (!exp || !sig || !/^\d{1,12}$/.test(exp) || !/^[0-9a-f]{64}$/.test(sig)) return false;
      if (Number(exp) * 1000 <= now.getTime()) return false;
      return all.some((key) => timingSafeEqual(Buffer.from(signWith(key, path, id, Number(exp)), 'hex'), Buffer.from(sig, 'hex')));
    },
  };
}
