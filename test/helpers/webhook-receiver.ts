import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { LocalCa } from './local-ca';

export type ReceivedDelivery = { path: string; headers: Record<string, string | string[] | undefined>; body: string; receivedAt: number };
/** How the receiver answers its n-th request (0-based) on a path. */
export type Answer = { status: number; delayMs?: number; headers?: Record<string, string> };

export type WebhookReceiver = {
  url(path: string): string;
  /** Scripts a path's answers; unscripted paths answer 200. */
  on(path: string, answer: (n: number) => Answer): void;
  received(path?: string): ReceivedDelivery[];
  close(): Promise<void>;
};

/** A real HTTPS receiver on 127.0.0.1 with a certificate from the test CA. */
export async function startWebhookReceiver(ca: LocalCa): Promise<WebhookReceiver> {
  const received: ReceivedDelivery[] = [];
  const scripts = new Map<string, (n: number) => Answer>();
  const pending = new Set<NodeJS.Timeout>();
  const server = https.createServer({ key: ca.key, cert: ca.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      const n = received.filter((r) => r.path === path).length;
      received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), receivedAt: Date.now() });
      const answer = scripts.get(path)?.(n) ?? { status: 200 };
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers });
        res.end('ok');
      };
      if (!answer.delayMs) return send();
      const timer = setTimeout(() => {
        pending.delete(timer);
        send();
      }, answer.delayMs);
      pending.add(timer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path) => `https://127.0.0.1:${port}${path}`,
    on: (path, answer) => void scripts.set(path, answer),
    received: (path) => (path === undefined ? [...received] : received.filter((r) => r.path === path)),
    async close() {
      for (const timer of pending) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
