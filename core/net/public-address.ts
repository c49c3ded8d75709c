import ipaddr from 'ipaddr.js';

/**
 * The IANA special-purpose blocks we refuse to call, spelled out so the list does not move
 * when ipaddr.js renames or regroups its ranges; `range()` then catches whatever else it knows
 * is not plain unicast.
 */
const BLOCKED_V4 = [
  '0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12',
  '192.0.0.0/24', '192.0.2.0/24', '192.168.0.0/16', '198.18.0.0/15', '198.51.100.0/24',
  '203.0.113.0/24', '224.0.0.0/4', '240.0.0.0/4',
].map((cidr) => ipaddr.IPv4.parseCIDR(cidr));

const BLOCKED_V6 = [
  '::/128', '::1/128', '100::/64', '2001:db8::/32', 'fc00::/7', 'fe80::/10', 'ff00::/8',
].map((cidr) => ipaddr.IPv6.parseCIDR(cidr));

/** Only this block holds global unicast today; anything outside it is reserved or special. */
const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');
/** NAT64 (RFC 6052): the last 32 bits are the IPv4 address the translator will dial. */
const NAT64_V6 = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

function isPublicV4(address: ipaddr.IPv4): boolean {
  return !BLOCKED_V4.some((cidr) => address.match(cidr)) && address.range() === 'unicast';
}

/**
 * Whether an IP address (IPv4, IPv6, bracketed IPv6 or an IPv4-mapped/NAT64 form, which are
 * judged as the IPv4 they carry) is publicly routable. Anything that does not parse is not.
 */
export function isPublicAddress(ip: string): boolean {
  const text = ip.replace(/^\[|\]$/g, '');
  if (!ipaddr.isValid(text)) return false;
  let address: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    // `process` turns ::ffff:a.b.c.d into a.b.c.d.
    address = ipaddr.process(text);
  } catch {
    return false;
  }
  if (address.kind() === 'ipv4') return isPublicV4(address as ipaddr.IPv4);
  const v6 = address as ipaddr.IPv6;
  if (v6.match(NAT64_V6)) {
    const bytes = v6.toByteArray().slice(12);
    return isPublicV4(new ipaddr.IPv4(bytes));
  }
  return v6.match(GLOBAL_UNICAST_V6) && !BLOCKED_V6.some((cidr) => v6.match(cidr)) && v6.range() === 'unicast';
}
