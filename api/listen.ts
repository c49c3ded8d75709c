import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Serves the app. `Expect: 100-continue` requests go through the app too, so an oversized or
 * unauthenticated upload is refused before the client sends its body (the body reader sends
 * the 100 only when it is about to read).
 */
export async function listen(app: { callback(): http.RequestListener }, port: number, host = '0.0.0.0'): Promise<{ server: http.Server; port: number; close(): Promise<void> }> {
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
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
