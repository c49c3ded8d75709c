import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Signed output links (spec 2.1, 4.2 rule 4): `/files/jobs/<job id>?exp=<unix>&sig=<hex>`,
 * where `sig` is HMAC-SHA256 of `<job id>.<exp>`. No credential is needed to follow one; a
 * wrong signature or a passed `exp` answers 404.
 */
export type LinkSigner = {
  url(baseUrl: string, jobId: string, expiresAt: Date): string;
  verify(jobId: string, exp: string | undefined, sig: string | undefined, now: Date): boolean;
};

export const OUTPUT_LINK_PATH = '/files/jobs';

export function createLinkSigner(key: Buffer): LinkSigner {
  const sign = (jobId: string, exp: number) => createHmac('sha256', key).update(`${jobId}.${exp}`).digest('hex');
  return {
    url(baseUrl, jobId, expiresAt) {
      const exp = Math.floor(expiresAt.getTime() / 1000);
      return `${baseUrl.replace(/\/+$/, '')}${OUTPUT_LINK_PATH}/${jobId}?exp=${exp}&sig=${sign(jobId, exp)}`;
    },
    verify(jobId, exp, sig, now) {
      if (!exp || !sig || !/^\d{1,12}$/.test(exp) || !/^[0-9a-f]{64}$/.test(sig)) return false;
      if (Number(exp) * 1000 <= now.getTime()) return false;
      return timingSafeEqual(Buffer.from(sign(jobId, Number(exp)), 'hex'), Buffer.from(sig, 'hex'));
    },
  };
}
