import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { fetch as undiciFetch, Response as UndiciResponse, type Dispatcher } from 'undici';
import type { Sealer } from '../crypto/sealing';
import type { McpProtocolEra } from '../db/schema';
import { openServerCredential } from './credential';
import { mcpClient, mcpSseClientTransport, mcpStreamableHttpClientTransport } from './sdk';

/** How we name ourselves to upstream servers in `initialize`. */
export const MCP_CLIENT_INFO = { name: 'model-gateway', version: '1' } as const;

/** Where and how to reach one upstream server. */
export type McpTarget = {
  url: string;
  /** Credential headers sent on every request of the session. */
  headers: Record<string, string>;
  /** Each request of the session (the handshake, each listing or call) must answer within this. */
  timeoutMs: number;
  /** The era that worked last time, tried first; null tries streamable HTTP first. */
  protocolEra?: McpProtocolEra | null;
  /** A bound on the bytes of the session's response bodies together (agent calls); beyond it they fail. */
  responseLimit?: ResponseLimit;
};

/** Response bodies are cut after `bytes` in all; `onExceeded` is told once when that happens. */
export type ResponseLimit = { bytes: number; onExceeded(): void };

/** An open session: the SDK client, the era that worked, and close. */
export type McpSession = { client: Client; protocolEra: McpProtocolEra; close(): Promise<void> };

/** Why no session could be opened: each era tried, with its failure. */
export class McpConnectError extends Error {
  constructor(readonly attempts: { era: McpProtocolEra; error: string }[]) {
    super(attempts.map((a) => `${a.era === 'streamable_http' ? 'streamable HTTP' : 'HTTP+SSE'}: ${a.error}`).join('; '));
    this.name = 'McpConnectError';
  }
}

/**
 * The SDK's transports take a fetch; ours is undici's, through the guarded dispatcher (DESIGN 6.8):
 * non-public addresses are refused at connect time, unless the deployment allows them.
 */
function guardedFetch(dispatcher: Dispatcher, limit?: ResponseLimit) {
  let seen = 0;
  let exceeded = false;
  const counted = (res: UndiciResponse): UndiciResponse => {
    if (!limit || !res.body) return res;
    const body = res.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen > limit.bytes) {
          if (!exceeded) limit.onExceeded();
          exceeded = true;
          controller.error(new Error(`the server's answers exceed ${limit.bytes} bytes`));
          return;
        }
        controller.enqueue(chunk);
      },
    }));
    return new UndiciResponse(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return (async (url: string | URL, init?: RequestInit) => counted(await undiciFetch(url, { ...(init as object), dispatcher } as never))) as unknown as typeof fetch;
}

function transportFor(era: McpProtocolEra, target: McpTarget, dispatcher: Dispatcher): Transport {
  const url = new URL(target.url);
  const options = { requestInit: { headers: target.headers }, fetch: guardedFetch(dispatcher, target.responseLimit) };
  if (era === 'streamable_http') {
    const { StreamableHTTPClientTransport } = mcpStreamableHttpClientTransport();
    return new StreamableHTTPClientTransport(url, options);
  }
  const { SSEClientTransport } = mcpSseClientTransport();
  return new SSEClientTransport(url, options);
}

function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { message?: string; code?: string } };
  const cause = e?.cause?.code ?? e?.cause?.message;
  return `${e?.message ?? String(err)}${cause ? ` (${cause})` : ''}`.slice(0, 500);
}

/**
 * Opens an MCP client session (the official SDK's `Client`) to an upstream server: the
 * streamable HTTP transport first, falling back to the older HTTP+SSE transport (spec 2.6
 * `protocol_era` says which worked), or the era that worked last time first. Every request goes
 * through `dispatcher` (the guarded one) with the target's headers; the handshake is bounded by
 * `timeoutMs`. Callers close the session when done.
 */
export async function openMcpSession(target: McpTarget, deps: { dispatcher: Dispatcher }): Promise<McpSession> {
  const eras: McpProtocolEra[] = target.protocolEra === 'http_sse' ? ['http_sse', 'streamable_http'] : ['streamable_http', 'http_sse'];
  const attempts: { era: McpProtocolEra; error: string }[] = [];
  const { Client } = mcpClient();
  for (const era of eras) {
    const client = new Client(MCP_CLIENT_INFO, { capabilities: {} });
    try {
      await client.connect(transportFor(era, target, deps.dispatcher), { timeout: target.timeoutMs });
      return { client, protocolEra: era, close: () => client.close().catch(() => undefined) };
    } catch (err) {
      attempts.push({ era, error: describe(err) });
      await client.close().catch(() => undefined);
    }
  }
  throw new McpConnectError(attempts);
}

/**
 * Bounds on what one server may list (issue 20): a listing is read into memory and stored as
 * one row per tool, so a hostile or broken server must not be able to make either unbounded.
 * The bytes count every answer of the listing session (the handshake and every `tools/list`
 * page, SSE framing included), cut off as they arrive; a tool listing is not a tool result, so
 * it has its own bound rather than the server's `max_result_bytes`.
 */
export const MCP_MAX_LISTING_BYTES = 4 * 1024 * 1024;
/** At most this many pages of `tools/list` are read. */
export const MCP_MAX_TOOL_PAGES = 50;
/** At most this many tools are taken from one server (model APIs take far fewer tools per request). */
export const MCP_MAX_LISTED_TOOLS = 1000;

/**
 * A listing over one of the bounds above. Refused whole, never truncated: a partial listing
 * would mark the tools it left out as removed.
 */
export class McpListingTooLarge extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'McpListingTooLarge';
  }
}

/** Every tool the session's server lists, following `nextCursor`, within the page and tool bounds. */
export async function listAllTools(session: McpSession, timeoutMs: number): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MCP_MAX_TOOL_PAGES; page++) {
    const answer = await session.client.listTools(cursor ? { cursor } : {}, { timeout: timeoutMs });
    tools.push(...answer.tools);
    if (tools.length > MCP_MAX_LISTED_TOOLS) throw new McpListingTooLarge(`the server lists more than ${MCP_MAX_LISTED_TOOLS} tools`);
    cursor = answer.nextCursor;
    if (!cursor) return tools;
  }
  throw new McpListingTooLarge(`the server's tool listing runs past ${MCP_MAX_TOOL_PAGES} pages`);
}

/** A registered server as the session opener needs it (a `mcp_servers` row has these columns). */
export type RegisteredMcpServer = {
  id: string;
  orgId: string;
  url: string;
  credentialSealed: string | null;
  timeoutMs: number;
  protocolEra: McpProtocolEra | null;
};

/**
 * Opens a session to a registered server: its sealed credential headers opened, its `timeout_ms`,
 * its last `protocol_era` first, through the guarded dispatcher. What the agent endpoint and the
 * sync both use.
 */
export function openServerSession(server: RegisteredMcpServer, deps: { sealer: Sealer; dispatcher: Dispatcher }, options: { responseLimit?: ResponseLimit } = {}): Promise<McpSession> {
  return openMcpSession({
    url: server.url,
    headers: openServerCredential(deps.sealer, server),
    timeoutMs: server.timeoutMs,
    protocolEra: server.protocolEra,
    ...options,
  }, deps);
}

/**
 * Lists a server's tools in one short session: the era that worked and the tools. The session's
 * answers are cut off past MCP_MAX_LISTING_BYTES (the session is closed at once, so a pending
 * request fails instead of waiting for its timeout) and the listing is refused as too large.
 */
export async function discoverTools(target: McpTarget, deps: { dispatcher: Dispatcher }): Promise<{ protocolEra: McpProtocolEra; tools: Tool[] }> {
  let session: McpSession | null = null;
  const cut = { hit: false };
  const responseLimit: ResponseLimit = {
    bytes: MCP_MAX_LISTING_BYTES,
    onExceeded: () => {
      cut.hit = true;
      void session?.close();
    },
  };
  try {
    session = await openMcpSession({ ...target, responseLimit }, deps);
    return { protocolEra: session.protocolEra, tools: await listAllTools(session, target.timeoutMs) };
  } catch (err) {
    if (cut.hit) throw new McpListingTooLarge(`the server's tool listing is larger than ${MCP_MAX_LISTING_BYTES} bytes`);
    throw err;
  } finally {
    await (session as McpSession | null)?.close();
  }
}
