import http from 'node:http';
import net from 'node:net';
import { request, type Agent } from 'undici';
import { createGuardedDispatcher, GUARDED_ADDRESS_CODE, GuardedAddressError, isGuardedAddressError } from '../../core/net/guarded-dispatcher';
import { isPublicAddress } from '../../core/net/public-address';
import { isPrivateHost } from '../../core/net/service-url';
import { checkProviderCredential } from '../../core/providers/credential-check';
import { createUpstreamAgent, sendUpstream } from '../../core/providers/upstream';

/**
 * Every dial the guarded connector makes passes through here. Loopback dials go to the real
 * connector; anything else is recorded and failed on the spot, so no test ever sends a packet
 * to a public or private-range address, whatever the code under test decides.
 */
type Dial = { hostname: string; servername?: string };
const mockDials: Dial[] = [];
jest.mock('undici', () => {
  const actual = jest.requireActual<typeof import('undici')>('undici');
  return {
    ...actual,
    buildConnector: (options: Parameters<typeof actual.buildConnector>[0]) => {
      const real = actual.buildConnector(options);
      return (opts: Parameters<typeof real>[0], callback: Parameters<typeof real>[1]) => {
        mockDials.push({ hostname: opts.hostname, servername: opts.servername ?? undefined });
        if (opts.hostname === '::1' || opts.hostname.startsWith('127.')) return real(opts, callback);
        callback(Object.assign(new Error(`test: ${opts.hostname} is not dialled`), { code: 'ECONNREFUSED' }), null);
      };
    },
  };
});

/** One sample per blocked range, as literals. */
const BLOCKED = [
  '0.1.2.3', '10.1.2.3', '100.64.0.1', '127.0.0.1', '169.254.169.254', '172.16.0.1', '172.31.255.254',
  '192.0.0.8', '192.0.2.1', '192.168.1.1', '198.19.0.1', '198.51.100.7', '203.0.113.9', '239.255.255.250',
  '250.1.2.3', '255.255.255.255',
  '::', '::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', '64:ff9b::a9fe:a9fe', '100::1', '2001:db8::1',
  'fc00::1', 'fd12:3456::1', 'fe80::1', 'ff02::1',
];
const PUBLIC = ['93.184.216.34', '8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '2a00:1450:4001::1', '::ffff:8.8.8.8', '64:ff9b::808:808'];

type Local = { port: number; connections: number; requests: http.IncomingMessage[]; close(): Promise<void> };

async function localServer(status = 200): Promise<Local> {
  const local: Local = { port: 0, connections: 0, requests: [], close: async () => undefined };
  const server = http.createServer((req, res) => {
    local.requests.push(req);
    res.writeHead(status, { 'content-type': 'application/json' }).end('{"data":[]}');
  });
  server.on('connection', () => local.connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  local.port = (server.address() as net.AddressInfo).port;
  local.close = () => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
  return local;
}

async function refusal(dispatcher: Agent, url: string): Promise<{ code?: string; message: string }> {
  try {
    const res = await request(url, { dispatcher });
    await res.body.dump();
  } catch (err) {
    return err as { code?: string; message: string };
  }
  throw new Error(`${url} was not refused`);
}

const bracket = (ip: string) => (ip.includes(':') ? `[${ip}]` : ip);

describe('isPublicAddress', () => {
  it.each(BLOCKED)('refuses %s', (ip) => {
    expect(isPublicAddress(ip)).toBe(false);
    expect(isPrivateHost(bracket(ip))).toBe(true);
  });

  it.each(PUBLIC)('allows %s', (ip) => {
    expect(isPublicAddress(ip)).toBe(true);
    expect(isPrivateHost(bracket(ip))).toBe(false);
  });

  it('refuses what is not an address, and IPv6 outside global unicast', () => {
    for (const junk of ['', 'example.com', '1.2.3.4.5', '::ffff:0:127.0.0.1', '::7f00:1', 'fec0::1']) expect(isPublicAddress(junk)).toBe(false);
  });
});

describe('createGuardedDispatcher', () => {
  let local: Local;
  const open: Agent[] = [];
  const guarded = (options: Parameters<typeof createGuardedDispatcher>[0]) => {
    const agent = createGuardedDispatcher(options);
    open.push(agent);
    return agent;
  };

  beforeEach(async () => {
    mockDials.length = 0;
    local = await localServer();
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((a) => a.close()));
    await local.close();
  });

  it.each(BLOCKED)('refuses the literal %s without dialling', async (ip) => {
    const err = await refusal(guarded({ allowPrivateNetwork: false }), `http://${bracket(ip)}:${local.port}/`);
    expect(err.code).toBe(GUARDED_ADDRESS_CODE);
    expect(isGuardedAddressError(err)).toBe(true);
    expect(mockDials).toEqual([]);
    expect(local.connections).toBe(0);
  });

  it.each(BLOCKED)('refuses a name resolving to %s without dialling', async (ip) => {
    const resolve = jest.fn(async () => [ip]);
    const err = await refusal(guarded({ allowPrivateNetwork: false, resolve }), `https://api.provider.test:${local.port}/v1/models`);
    expect(err).toBeInstanceOf(GuardedAddressError);
    expect(err.message).toContain('api.provider.test');
    expect(resolve).toHaveBeenCalledWith('api.provider.test');
    expect(mockDials).toEqual([]);
    expect(local.connections).toBe(0);
  });

  it('refuses the metadata endpoint as an IP-literal URL, which no DNS hook would see', async () => {
    const resolve = jest.fn(async () => ['93.184.216.34']);
    const err = await refusal(guarded({ allowPrivateNetwork: false, resolve }), 'http://169.254.169.254/latest');
    expect(err.code).toBe(GUARDED_ADDRESS_CODE);
    expect(resolve).not.toHaveBeenCalled();
    expect(mockDials).toEqual([]);
  });

  it('refuses a name when any one of its addresses is not public', async () => {
    const err = await refusal(guarded({ allowPrivateNetwork: false, resolve: async () => ['93.184.216.34', '127.0.0.1'] }), `http://rebind.test:${local.port}/`);
    expect(err.code).toBe(GUARDED_ADDRESS_CODE);
    expect(mockDials).toEqual([]);
    expect(local.connections).toBe(0);
  });

  it('resolves once per connection and dials the address it checked: a rebinding answer never reaches loopback', async () => {
    const answers = [['93.184.216.34'], ['127.0.0.1']];
    const resolve = jest.fn(async () => answers.shift() ?? ['127.0.0.1']);
    const dispatcher = guarded({ allowPrivateNetwork: false, resolve });
    // The public answer is what gets dialled (the test connector fails it without a packet).
    const first = await refusal(dispatcher, `http://rebind.test:${local.port}/`);
    expect(first.code).toBe('ECONNREFUSED');
    expect(resolve).toHaveBeenCalledTimes(1);
    expect(mockDials.map((d) => d.hostname)).toEqual(['93.184.216.34']);
    // The next connection asks again, gets loopback, and is refused.
    const second = await refusal(dispatcher, `http://rebind.test:${local.port}/`);
    expect(second.code).toBe(GUARDED_ADDRESS_CODE);
    expect(resolve).toHaveBeenCalledTimes(2);
    expect(mockDials.map((d) => d.hostname)).toEqual(['93.184.216.34']);
    expect(local.connections).toBe(0);
  });

  it('with allowPrivateNetwork reaches a local server, dialling the resolved address with the Host header of the name', async () => {
    const dispatcher = guarded({ allowPrivateNetwork: true, resolve: async () => ['127.0.0.1'] });
    const res = await request(`http://named.test:${local.port}/hello`, { dispatcher });
    await res.body.dump();
    expect(res.statusCode).toBe(200);
    expect(local.requests.map((r) => r.headers.host)).toEqual([`named.test:${local.port}`]);
    expect(mockDials.map((d) => d.hostname)).toEqual(['127.0.0.1']);

    const literal = await request(`http://127.0.0.1:${local.port}/`, { dispatcher });
    await literal.body.dump();
    expect(literal.statusCode).toBe(200);
  });

  it('with allowPrivateNetwork reaches localhost through the system resolver', async () => {
    const res = await request(`http://localhost:${local.port}/`, { dispatcher: guarded({ allowPrivateNetwork: true }) });
    await res.body.dump();
    expect(res.statusCode).toBe(200);
  });

  it('moves to the next checked address when one refuses at once', async () => {
    const dispatcher = guarded({ allowPrivateNetwork: true, resolve: async () => ['::1', '127.0.0.1'] });
    const res = await request(`http://two.test:${local.port}/`, { dispatcher });
    await res.body.dump();
    expect(res.statusCode).toBe(200);
    expect(mockDials.map((d) => d.hostname)).toEqual(['::1', '127.0.0.1']);
  });

  it('keeps the original name as the TLS servername while dialling the checked address', async () => {
    const hellos: Buffer[] = [];
    const tlsServer = net.createServer((socket) => socket.once('data', (chunk: Buffer) => {
      hellos.push(chunk);
      socket.destroy();
    }));
    await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
    const port = (tlsServer.address() as net.AddressInfo).port;
    try {
      const dispatcher = guarded({ allowPrivateNetwork: true, resolve: async () => ['127.0.0.1'] });
      await refusal(dispatcher, `https://sni.provider.test:${port}/`);
      expect(mockDials).toEqual([{ hostname: '127.0.0.1', servername: 'sni.provider.test' }]);
      // The ClientHello carries the name in its SNI extension.
      expect(hellos).toHaveLength(1);
      expect(hellos[0]!.includes('sni.provider.test')).toBe(true);
    } finally {
      await new Promise<void>((resolve) => tlsServer.close(() => resolve()));
    }
  });

  it('fails a name with no addresses, or one that does not resolve in time, as a connection error', async () => {
    const empty = await refusal(guarded({ allowPrivateNetwork: false, resolve: async () => [] }), 'http://nothing.test/');
    expect(empty.code).toBe('ENOTFOUND');
    const slow = await refusal(guarded({ allowPrivateNetwork: false, connectTimeoutMs: 20, resolve: () => new Promise<string[]>(() => undefined) }), 'http://slow.test/');
    expect(slow.code).toBe('UND_ERR_CONNECT_TIMEOUT');
    expect(mockDials).toEqual([]);
  });
});

describe('callers of the guarded dispatcher', () => {
  let local: Local;
  beforeEach(async () => {
    mockDials.length = 0;
    local = await localServer();
  });
  afterEach(() => local.close());

  it('the credential check refuses a private address without calling it', async () => {
    const dispatcher = createGuardedDispatcher({ allowPrivateNetwork: false });
    try {
      const check = await checkProviderCredential(dispatcher, 'openai', `http://127.0.0.1:${local.port}/v1`, 'sk-test-secret');
      expect(check.outcome).toBe('unreachable');
      expect(JSON.stringify(check)).not.toContain('sk-test-secret');
      expect(local.connections).toBe(0);
      expect(local.requests).toHaveLength(0);
    } finally {
      await dispatcher.close();
    }
  });

  it('the credential check goes through the dispatcher it is given', async () => {
    const dispatcher = createGuardedDispatcher({ allowPrivateNetwork: true });
    try {
      const check = await checkProviderCredential(dispatcher, 'openai', `http://127.0.0.1:${local.port}/v1`, 'sk-test-secret');
      expect(check).toEqual({ outcome: 'accepted' });
      expect(local.requests.map((r) => [r.url, r.headers.authorization])).toEqual([['/v1/models', 'Bearer sk-test-secret']]);
      expect(mockDials.map((d) => d.hostname)).toEqual(['127.0.0.1']);
    } finally {
      await dispatcher.close();
    }
  });

  it('the upstream agent refuses an IP-literal metadata URL as a connection failure', async () => {
    const agent = createUpstreamAgent({ allowPrivateNetwork: false });
    try {
      const classifyError = jest.fn();
      const sent = await sendUpstream(
        agent,
        { classifyError },
        { kind: 'openai', baseUrls: ['http://169.254.169.254/latest', `http://127.0.0.1:${local.port}/v1`], secrets: ['sk-test-secret'], timeoutMs: 5_000 },
        { path: '/chat/completions', body: {} },
        new AbortController().signal,
      );
      expect(sent).toEqual({ ok: false, failure: { kind: 'connection', message: expect.stringContaining(GUARDED_ADDRESS_CODE) } });
      expect(classifyError).not.toHaveBeenCalled();
      expect(mockDials).toEqual([]);
      expect(local.connections).toBe(0);
    } finally {
      await agent.close();
    }
  });
});
