import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Serves the app. `Expect: 100-continue` requests go through the app too, so an oversized or
 * unauthenticated upload is refused before the client sends its body (the body reader sends
 * the 100 only when it is about to read).
 */
export async function listen(app: { callback(): http.RequestListener }, port: number, host = '0.0.0.0'): Promise<{ server: http.Server; port: number; close(graceMs?: number): Promise<void> }> {
  const handler = app.callback();
  const server = http.createServer(handler);
  server.on('checkContinue', handler);
  // Long enough for a chat stream between tokens; slow-loris bodies are cut by requestTimeout.
  server.keepAliveTimeout = 65_000;
  server.requestTimeout = 300_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    /**
     * Stops accepting, lets the requests under way answer (at most `graceMs`), then cuts what
     * is left. Idle keep-alive connections close at once, so clients reconnect elsewhere.
     */
    close: (graceMs = 0) =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        if (graceMs <= 0) return server.closeAllConnections();
        const cut = setTimeout(() => server.closeAllConnections(), graceMs);
        cut.unref();
        // A connection whose request answered while draining goes idle: closed at the next look.
        const idle = setInterval(() => server.closeIdleConnections(), 100);
        idle.unref();
        server.once('close', () => {
          clearTimeout(cut);
          clearInterval(idle);
        });
      }),
  };
}
