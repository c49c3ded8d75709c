import ipaddr from 'ipaddr.js';

export type CidrRange = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** `1.2.3.4` becomes `1.2.3.4/32`; ranges are normalised to their network address. Throws on garbage. */
export function canonicalCidr(input: string): string {
  const text = input.trim();
  if (text.includes('/')) {
    const [addr, bits] = ipaddr.parseCIDR(text);
    const network = addr.kind() === 'ipv4'
      ? ipaddr.IPv4.networkAddressFromCIDR(text)
      : ipaddr.IPv6.networkAddressFromCIDR(text);
    return `${network.toString()}/${bits}`;
  }
  const addr = ipaddr.parse(text);
  return `${addr.toString()}/${addr.kind() === 'ipv4' ? 32 : 128}`;
}

export function parseRanges(cidrs: readonly string[]): CidrRange[] {
  return cidrs.map((c) => ipaddr.parseCIDR(c));
}

/** IPv4-mapped IPv6 client addresses (`::ffff:1.2.3.4`) match IPv4 ranges. */
export function addressAllowed(ranges: readonly CidrRange[], address: string): boolean {
  if (ranges.length === 0) return true;
  if (!ipaddr.isValid(address)) return false;
  const addr = ipaddr.process(address);
  return ranges.some(([net, bits]) => addr.kind() === net.kind() && addr.match([net, bits] as never));
}
