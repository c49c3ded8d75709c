import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** What `tools/list` answers: one small tool, or a listing over one of the gateway's bounds. */
export type ListingMode = 'small' | 'huge' | 'crowded' | 'endless';

export type ListingMcpServer = {
  /** Streamable HTTP endpoint to register. */
  url: string;
  /** Change between listings. */
  mode: ListingMode;
  /** `tools/list` requests answered so far. */
  listings: number;
  close(): Promise<void>;
};

const inputSchema = { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] };

/** The tools of one `tools/list` page, and the cursor of the next page (none: last page). */
function page(mode: ListingMode, cursor: string | undefined): { tools: unknown[]; nextCursor?: string } {
  const lookup = { name: 'lookup', description: 'Look up a record', inputSchema, annotations: { readOnlyHint: true } };
  switch (mode) {
    case 'small':
      return { tools: [lookup] };
    case 'huge':
      // About 6 MiB over 3 tools: each one fine, the listing together too large.
      return { tools: [lookup, ...[1, 2, 3].map((n) => ({ name: `bulky${n}`, description: 'd'.repeat(2 * 1024 * 1024), inputSchema }))] };
    case 'crowded':
      return { tools: [lookup, ...Array.from({ length: 1000 }, (_, n) => ({ name: `tool${n}`, description: 'A small tool', inputSchema }))] };
    case 'endless': {
      const n = Number(cursor ?? 0);
      return { tools: n === 0 ? [lookup] : [{ name: `page${n}`, description: 'One more page', inputSchema }], nextCursor: String(n + 1) };
    }
  }
}

/**
 * An MCP server answering JSON-RPC by hand over streamable HTTP (JSON answers), for listings an
 * SDK-built server would not make: several megabytes, more than a thousand tools, or pages
 * without end. A test fixture only; the gateway itself speaks through the SDK.
 */
export async function startListingMcpServer(mode: ListingMode = 'small'): Promise<ListingMcpServer> {
  const state: ListingMcpServer = { url: '', mode, listings: 0, close: async () => undefined };
  const server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      if (req.method !== 'POST') return void res.writeHead(405, { allow: 'POST' }).end();
      const message = JSON.parse(text) as { id?: number; method: string; params?: { protocolVersion?: string; cursor?: string } };
      if (message.id === undefined) return void res.writeHead(202).end();
      const answer = (body: Record<string, unknown>) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id, ...body }));
      switch (message.method) {
        case 'initialize':
          return void answer({ result: { protocolVersion: message.params!.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'listing', version: '1' } } });
        case 'tools/list':
          state.listings++;
          return void answer({ result: page(state.mode, message.params?.cursor) });
        default:
          return void answer({ error: { code: -32601, message: 'method not found' } });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  state.url = `http://127.0.0.1:${port}/mcp`;
  state.close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return state;
}
