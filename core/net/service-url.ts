import ipaddr from 'ipaddr.js';
import { isPublicAddress } from './public-address';

/**
 * Whether a URL the customer gives us (a provider base URL, a webhook receiver) may be called:
 * HTTPS to a public host. A deployment that sets GW_ALLOW_PRIVATE_NETWORK (development, tests)
 * may also reach plain HTTP and private or loopback hosts. Names are judged by their form here;
 * the connection itself re-checks resolved addresses when it is made.
 */
export type UrlVerdict = { ok: true; url: URL } | { ok: false; reason: string };

const PRIVATE_SUFFIXES = ['.localhost', '.local', '.internal', '.localdomain', '.home.arpa'];

export function isPrivateHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (ipaddr.isValid(host)) return !isPublicAddress(host);
  return host === 'localhost' || !host.includes('.') || PRIVATE_SUFFIXES.some((s) => host.endsWith(s));
}

export function checkServiceUrl(raw: string, options: { allowPrivateNetwork: boolean }): UrlVerdict {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'is not a URL' };
  }
  if (url.username || url.password) return { ok: false, reason: 'must not carry credentials' };
  const privateHost = isPrivateHost(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && options.allowPrivateNetwork)) {
    return { ok: false, reason: 'must use https' };
  }
  if (privateHost && !options.allowPrivateNetwork) return { ok: false, reason: 'must name a public host' };
  return { ok: true, url };
}

/** Whether `host` is `domain` or one of its subdomains. */
export function hostOnDomain(host: string, domain: string): boolean {
  const h = host.toLowerCase();
  const d = domain.toLowerCase();
  return h === d || h.endsWith(`.${d}`);
}
