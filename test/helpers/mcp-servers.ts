import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

/** One tool a test server lists; change `description` (or add/remove tools) between syncs. */
export type TestTool = {
  name: string;
  description: string;
  readOnly?: boolean;
  /** What a call answers (default: one text `<name>:<query>`); slow or oversized answers for the agent-endpoint tests. */
  answer?: (query: string) => CallToolResult | Promise<CallToolResult>;
  /** The `query` argument's schema (default: any string); a `pattern` in it reaches the listing. */
  query?: z.ZodString;
};

export type TestMcpServer = {
  /** The URL to register (`/mcp` for streamable HTTP, `/sse` for the older HTTP+SSE transport). */
  url: string;
  /** What the server lists; mutate it to change definitions between syncs. */
  tools: TestTool[];
  /** Every request's headers, to check what credentials arrived. */
  seenHeaders: http.IncomingHttpHeaders[];
  /** While true, every request answers 503. */
  down: boolean;
  close(): Promise<void>;
};

/** A real SDK `McpServer` listing the current tools (built afresh per session, so changes show). */
function buildServer(state: { tools: TestTool[] }): McpServer {
  const server = new McpServer({ name: 'test-mcp', version: '1.0.0' });
  for (const tool of state.tools) {
    server.registerTool(tool.name, {
      description: tool.description,
      inputSchema: { query: tool.query ?? z.string() },
      annotations: { readOnlyHint: tool.readOnly ?? false },
    }, async ({ query }) => (tool.answer ? tool.answer(query) : { content: [{ type: 'text', text: `${tool.name}:${query}` }] }));
  }
  return server;
}

/**
 * An MCP server made with the official SDK on 127.0.0.1 over plain HTTP (tests run the API with
 * GW_ALLOW_PRIVATE_NETWORK). `streamable_http`: `StreamableHTTPServerTransport` at `/mcp`,
 * stateless. `http_sse`: `SSEServerTransport`, stream at `/sse`, messages at `/messages`; a POST
 * to `/sse` (what a streamable client tries first) answers 405 as such servers do.
 * `requiredHeaders` (lower-case names): requests without them answer 401.
 */
export async function startTestMcpServer(era: 'streamable_http' | 'http_sse', tools: TestTool[], options: { requiredHeaders?: Record<string, string> } = {}): Promise<TestMcpServer> {
  const state: TestMcpServer = { url: '', tools, seenHeaders: [], down: false, close: async () => undefined };
  const sse = new Map<string, SSEServerTransport>();

  const httpServer = http.createServer((req, res) => {
    void (async () => {
      state.seenHeaders.push(req.headers);
      if (state.down) return void res.writeHead(503).end('down');
      for (const [name, value] of Object.entries(options.requiredHeaders ?? {})) {
        if (req.headers[name] !== value) return void res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
      }
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      if (era === 'streamable_http') {
        if (path !== '/mcp') return void res.writeHead(404).end();
        if (req.method !== 'POST') return void res.writeHead(405, { allow: 'POST' }).end();
        const server = buildServer(state);
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        res.on('close', () => void transport.close().then(() => server.close()));
        await server.connect(transport);
        await transport.handleRequest(req, res);
        return;
      }
      if (path === '/sse' && req.method === 'GET') {
        const transport = new SSEServerTransport('/messages', res);
        sse.set(transport.sessionId, transport);
        res.on('close', () => sse.delete(transport.sessionId));
        await buildServer(state).connect(transport);
        return;
      }
      if (path === '/messages' && req.method === 'POST') {
        const transport = sse.get(new URL(req.url ?? '/', 'http://x').searchParams.get('sessionId') ?? '');
        if (!transport) return void res.writeHead(404).end('no session');
        await transport.handlePostMessage(req, res);
        return;
      }
      res.writeHead(path === '/sse' ? 405 : 404).end();
    })().catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(err));
    });
  });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  const { port } = httpServer.address() as AddressInfo;
  state.url = `http://127.0.0.1:${port}${era === 'streamable_http' ? '/mcp' : '/sse'}`;
  state.close = async () => {
    httpServer.closeAllConnections();
    await new Promise<void>((resolve) => httpServer.close(() => resolve()));
  };
  return state;
}
