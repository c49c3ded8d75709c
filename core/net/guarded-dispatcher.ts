import dns from 'node:dns';
import net from 'node:net';
import { Agent, buildConnector, errors as undiciErrors } from 'undici';
import { isPublicAddress } from './public-address';

/** The code a refused connection carries, whatever wraps it on the way up. */
export const GUARDED_ADDRESS_CODE = 'EPRIVATE';

/** A connection refused because its host is, or resolves to, an address that is not public. */
export class GuardedAddressError extends Error {
  readonly code = GUARDED_ADDRESS_CODE;
  constructor(readonly host: string) {
    super(`refusing to connect to ${host}: it is not a public address`);
    this.name = 'GuardedAddressError';
  }
}

/** Whether an error (or its cause) is the guard refusing an address. */
export function isGuardedAddressError(err: unknown): boolean {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null | undefined;
  return err instanceof GuardedAddressError || e?.code === GUARDED_ADDRESS_CODE || e?.cause?.code === GUARDED_ADDRESS_CODE;
}

export type GuardedDispatcherOptions = {
  /** Development and tests only (GW_ALLOW_PRIVATE_NETWORK): private and loopback hosts allowed. */
  allowPrivateNetwork: boolean;
  /** Every address a name resolves to; `dns.lookup` (the system resolver) unless a test injects one. */
  resolve?: (hostname: string) => Promise<string[]>;
  /** Resolution plus the TCP and TLS handshakes, per address tried. */
  connectTimeoutMs?: number;
  /** Pool settings (keep-alive, connections per origin); the connector is always the guarded one. */
  agentOptions?: Omit<Agent.Options, 'connect'>;
};

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** Failures that come back at once and say nothing about the host's other addresses. */
const TRY_NEXT_ADDRESS = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

async function systemResolve(hostname: string): Promise<string[]> {
  const answers = await dns.promises.lookup(hostname, { all: true });
  return answers.map((a) => a.address);
}

function withTimeout<T>(work: Promise<T>, ms: number, hostname: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new undiciErrors.ConnectTimeoutError(`resolving ${hostname} took longer than ${ms} ms`)), ms);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/**
 * The one dispatcher for calls to addresses a customer or a provider chose. Its connector
 * resolves the name once, refuses unless every address is public, and dials the very address
 * it checked (so a second, rebinding DNS answer is never asked for). The TLS servername stays
 * the original host, so SNI and certificate verification (Node's trust store plus
 * NODE_EXTRA_CA_CERTS) are about the name; undici sets the Host header from the origin.
 */
export function createGuardedDispatcher(options: GuardedDispatcherOptions): Agent {
  const timeout = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const resolve = options.resolve ?? systemResolve;
  const dial = buildConnector({ timeout });

  async function checkedAddresses(hostname: string): Promise<string[]> {
    const literal = net.isIP(hostname) !== 0;
    const addresses = literal ? [hostname] : await withTimeout(resolve(hostname), timeout, hostname);
    if (addresses.length === 0) throw Object.assign(new Error(`${hostname} has no addresses`), { code: 'ENOTFOUND' });
    if (!options.allowPrivateNetwork && addresses.some((a) => !isPublicAddress(a))) throw new GuardedAddressError(hostname);
    return addresses;
  }

  const connect: buildConnector.connector = (opts, callback) => {
    const hostname = opts.hostname;
    const literal = net.isIP(hostname) !== 0;
    // An IP literal keeps undici's own servername (none: SNI carries no IPs); a name keeps
    // itself as the servername while the socket goes to the checked address.
    const servername = literal ? opts.servername : opts.servername || hostname;
    checkedAddresses(hostname).then(
      (addresses) => {
        const attempt = (index: number): void => {
          dial({ ...opts, hostname: addresses[index]!, servername }, (...args) => {
            const [err] = args;
            const code = (err as { code?: string } | null)?.code ?? '';
            if (err && TRY_NEXT_ADDRESS.has(code) && index + 1 < addresses.length) return attempt(index + 1);
            callback(...args);
          });
        };
        attempt(0);
      },
      (err: unknown) => callback(err instanceof Error ? err : new Error(String(err)), null),
    );
  };

  return new Agent({ ...options.agentOptions, connect });
}
