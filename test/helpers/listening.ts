import fs from 'node:fs';

/**
 * The local addresses TCP sockets listen on at a port, as the kernel has them
 * (/proc/net/tcp and tcp6): what a process bound, whichever code bound it (the Temporal SDK's
 * exporter is Rust). `127.0.0.1`, `::1`, `0.0.0.0`, `::`, or another address.
 */
export function listeningAddresses(port: number): string[] {
  const found: string[] = [];
  for (const [file, v6] of [['/proc/net/tcp', false], ['/proc/net/tcp6', true]] as const) {
    if (!fs.existsSync(file)) continue;
    for (const line of fs.readFileSync(file, 'utf8').split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      // 0A: LISTEN.
      if (!local || state !== '0A') continue;
      const [hex, portHex] = local.split(':');
      if (parseInt(portHex!, 16) === port) found.push(v6 ? ipv6Of(hex!) : ipv4Of(hex!));
    }
  }
  return found;
}

/** The kernel writes an IPv4 address as one little-endian word. */
function ipv4Of(hex: string): string {
  return [6, 4, 2, 0].map((i) => parseInt(hex.slice(i, i + 2), 16)).join('.');
}

/** ...and an IPv6 address as four little-endian words. */
function ipv6Of(hex: string): string {
  const groups: string[] = [];
  for (let word = 0; word < 4; word++) {
    const w = hex.slice(word * 8, word * 8 + 8);
    const bytes = [6, 4, 2, 0].map((i) => w.slice(i, i + 2));
    groups.push(bytes[0]! + bytes[1]!, bytes[2]! + bytes[3]!);
  }
  const full = groups.map((g) => parseInt(g, 16).toString(16)).join(':');
  if (full === '0:0:0:0:0:0:0:0') return '::';
  if (full === '0:0:0:0:0:0:0:1') return '::1';
  return full;
}
