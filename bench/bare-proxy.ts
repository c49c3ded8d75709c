/**
 * The limit the gateway is measured against: a pass-through proxy with no logic, in its own
 * process (`node --import tsx bench/bare-proxy.ts <port> <upstream origin>`; prints
 * `listening <port>`). node:http in, undici out, bodies streamed both ways.
 */
import http from 'node:http';
import { Agent, request } from 'undici';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'content-length']);

export function createBareProxy(upstream: string): http.Server {
  const agent = new Agent({ keepAliveTimeout: 60_000, connections: null });
  return http.createServer(async (req, res) => {
    try {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === 'string' && !HOP_BY_HOP.has(name)) headers[name] = value;
      }
      const answer = await request(`${upstream}${req.url}`, {
        method: req.method as 'POST',
        headers,
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : req,
        dispatcher: agent,
      });
      const out: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(answer.headers)) {
        if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
      }
      res.writeHead(answer.statusCode, out);
      for await (const part of answer.body) {
        if (!res.write(part)) await new Promise((resolve) => res.once('drain', resolve));
      }
      res.end();
    } catch (err) {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: (err as Error).message } }));
    }
  });
}

if (require.main === module) {
  const upstream = process.argv[3];
  if (!upstream) throw new Error('usage: bare-proxy.ts <port> <upstream origin>');
  const server = createBareProxy(upstream.replace(/\/+$/, ''));
  server.keepAliveTimeout = 60_000;
  server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
    console.log(`listening ${(server.address() as { port: number }).port}`);
  });
}
