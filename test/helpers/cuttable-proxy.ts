import net from 'node:net';

export type CuttableProxy = { port: number; url(base: string): string; cut(): void; restore(): void; close(): Promise<void> };

/**
 * A TCP proxy in front of a service (Postgres here) that a test can cut: `cut` drops every open
 * connection and hangs up on new ones, as a server going away or failing over does; `restore`
 * lets connections through again. The service itself is shared by every test and never stops.
 */
export async function startCuttableProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<CuttableProxy> {
  let down = false;
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    // Accepted and hung up at once: the client fails at once (no connect retry for a refusal).
    if (down) return void client.end();
    const upstream = net.connect(targetPort, targetHost);
    open.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const cut = () => {
    down = true;
    for (const s of open) s.resetAndDestroy();
    open.clear();
  };
  return {
    port,
    /** `base` (a postgres:// URL) with its host and port replaced by the proxy's. */
    url(base) {
      const u = new URL(base);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    cut,
    restore() {
      down = false;
    },
    async close() {
      cut();
      // Not waiting for clients that still hold a hung-up socket: nothing passes any more.
      server.close();
      server.unref();
    },
  };
}
