import type Router from '@koa/router';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { and, eq, inArray, isNotNull } from 'drizzle-orm';
import type { KeyContext } from '../../core/auth/gateway-key-auth';
import type { Database } from '../../core/db/client';
import { mcpServers, mcpServerTools, type McpToolDefinition } from '../../core/db/schema';
import { GatewayError } from '../../core/errors';
import { RequestGuard } from '../../core/guardrails/request-guard';
import { newId } from '../../core/ids';
import { checkArguments, checkResult, resultTexts, stringLeaves, ToolRefusal } from '../../core/mcp/agent-call';
import { McpConnectError, openServerSession, type McpSession, type ResponseLimit } from '../../core/mcp/client';
import { grantAllows, grantFor, mcpAccessEnabled, type McpGrantRow } from '../../core/mcp/grants';
import type { McpServerRow } from '../../core/mcp/sync';
import type { McpToolRow } from '../../core/mcp/tools';
import { mcpServer, mcpStreamableHttpClientTransport, mcpStreamableHttpServerTransport, mcpTypes } from '../../core/mcp/sdk';
import { countInWindow, retryAfterSeconds } from '../../core/ratelimit/fixed-window';
import type { Choice } from '../../core/providers/types';
import type { GatewayContext, GatewayState } from '../context';
import type { GatewayServices } from './services';

/**
 * The agent-facing tool gateway (issue 15): `/v1/mcp/{server_slug}` is an MCP server (the
 * official SDK's `Server` on a stateless streamable HTTP transport, JSON answers) in front of
 * one registered upstream server. Key auth, the key's rate tier and the JSON body come from the
 * /v1 middlewares; this adds the organization switch, the server's scope and the key's grant,
 * the server's own rate limit, and per call the approval, grant, argument, guardrail and result
 * checks, each refused call answered as a tool result flagged `isError` (spec 7).
 */

import { MCP_CALL_ENDPOINT } from '../../core/mcp/log-endpoint';
import { endRequestFromRow } from '../../core/observability/attempt-spans';
import type { RequestLogEntry } from '../../core/request-log/writer';

export { MCP_CALL_ENDPOINT };
/** Request-log `provider` of a tool call. */
export const MCP_LOG_PROVIDER = 'mcp';
/**
 * Request-log `price_source` of a tool call, logged with cost 0: the gateway bills nothing for
 * it and no provider does, so it is free rather than unpriced, and never counted as unpriced
 * traffic in usage or the request log's totals (issue 20).
 */
export const MCP_PRICE_SOURCE = 'tool_call';
/** Each server's `rate_limit_rpm` is counted in one-minute windows. */
const MCP_RATE_WINDOW_MS = 60_000;

export type McpRouteDeps = { db: Database; gateway: GatewayServices };

/** The one 404 for an unknown, disabled, out-of-scope or ungranted server (spec 7). */
function serverNotFound(slug: string): GatewayError {
  return new GatewayError('mcp_server_not_found', `No tool-gateway server \`${slug}\` is available to this key.`);
}

/** Whether a key may reach a server by its scope: its project and its environment (empty lists mean all). */
export function serverInScope(server: Pick<McpServerRow, 'projectIds' | 'environments'>, key: Pick<KeyContext, 'projectId' | 'environment'>): boolean {
  if (server.projectIds.length > 0 && !server.projectIds.includes(key.projectId)) return false;
  if (server.environments.length > 0 && (key.environment === null || !server.environments.includes(key.environment))) return false;
  return true;
}

/** The server and the key's grant on it, or the 404 (or 403 `mcp_disabled` for the whole organization). */
async function resolveServer(db: Database, key: KeyContext, slug: string): Promise<{ server: McpServerRow; grant: McpGrantRow }> {
  if (!(await mcpAccessEnabled(db, key.orgId))) {
    throw new GatewayError('mcp_disabled', 'Assistant (tool-gateway) access is turned off for this organization.');
  }
  const [server] = await db.select().from(mcpServers).where(and(eq(mcpServers.orgId, key.orgId), eq(mcpServers.slug, slug)));
  if (!server || server.status !== 'active' || !serverInScope(server, key)) throw serverNotFound(slug);
  const grant = await grantFor(db, key.lineageId, server.id);
  if (!grant || grant.orgId !== key.orgId) throw serverNotFound(slug);
  return { server, grant };
}

/** Spec 7: over the server's `rate_limit_rpm` is 429 `mcp_server_rate_limited` with `Retry-After`. */
async function countServerCall(services: GatewayServices, server: McpServerRow): Promise<void> {
  const window = await countInWindow(services.redis.redis, `mcp-rpm:{${server.orgId}}:${server.id}`, MCP_RATE_WINDOW_MS);
  if (window.count > server.rateLimitRpm) {
    throw new GatewayError('mcp_server_rate_limited', `This tool-gateway server takes at most ${server.rateLimitRpm} tool calls a minute.`, {
      headers: { 'Retry-After': String(retryAfterSeconds(window)) },
    });
  }
}

/**
 * The tools `tools/list` serves: approved ones, and approved ones the server has since changed
 * (`changed`), still listed upstream and with an exposed name, each under its APPROVED
 * definition; a changed tool stays visible as approved so the agent's call is answered
 * `tool_definition_changed` rather than an unknown name. Pending and blocked tools never show.
 */
function listableTools(db: Database, serverId: string): Promise<McpToolRow[]> {
  return db.select().from(mcpServerTools).where(and(
    eq(mcpServerTools.serverId, serverId), inArray(mcpServerTools.state, ['approved', 'changed']), eq(mcpServerTools.listed, true),
    isNotNull(mcpServerTools.exposedName), isNotNull(mcpServerTools.approvedDefinition),
  ));
}

/** A tool as agents see it: the approved definition under its exposed name. */
function servedTool(tool: McpToolRow): Tool {
  return { ...(tool.approvedDefinition as McpToolDefinition), name: tool.exposedName! } as Tool;
}

/**
 * Whether a key may call a tool (spec 7 codes, in this order): outside a `selected` grant is
 * `tool_not_allowed`; pending or blocked is `tool_not_approved`; an approved tool whose server now
 * lists another definition is `tool_definition_changed`; outside a `read` grant's class is
 * `tool_not_allowed`. An unknown or no longer listed name is `tool_not_allowed` too.
 */
export function refusalFor(grant: Pick<McpGrantRow, 'mode' | 'tools'>, tool: Pick<McpToolRow, 'state' | 'upstreamName' | 'accessClass' | 'listed' | 'approvedDefinition' | 'approvedSha256'> | null, name: string): ToolRefusal | null {
  if (!tool || !tool.listed) return new ToolRefusal('tool_not_allowed', `This key cannot call a tool \`${name}\` on this server.`);
  if (grant.mode === 'selected' && !grantAllows(grant, tool)) return new ToolRefusal('tool_not_allowed', `This key's grant does not include \`${name}\`.`);
  if (tool.state === 'pending' || tool.state === 'blocked' || !tool.approvedDefinition || !tool.approvedSha256) {
    return new ToolRefusal('tool_not_approved', `\`${name}\` is not approved for agents.`);
  }
  if (tool.state === 'changed') {
    return new ToolRefusal('tool_definition_changed', `The server changed \`${name}\` since it was approved; it cannot be called until the new definition is approved.`);
  }
  if (!grantAllows(grant, tool)) return new ToolRefusal('tool_not_allowed', `This key's grant allows only read tools; \`${name}\` is not one.`);
  return null;
}

/** How a failed upstream call is refused: timeouts, the server's own refusals, or unreachable. */
function upstreamRefusal(err: unknown, server: McpServerRow): ToolRefusal {
  if (err instanceof ToolRefusal) return err;
  const { ErrorCode, McpError } = mcpTypes();
  const { StreamableHTTPError } = mcpStreamableHttpClientTransport();
  if (err instanceof McpError) {
    if (err.code === ErrorCode.RequestTimeout) return new ToolRefusal('upstream_timeout', `The server did not answer within its \`timeout_ms\` (${server.timeoutMs} ms).`);
    if (err.code === ErrorCode.ConnectionClosed) return new ToolRefusal('upstream_unavailable', 'The connection to the server closed before it answered.');
    return new ToolRefusal('upstream_rejected', `The server refused the call (${err.code}): ${err.message}`.slice(0, 1000));
  }
  if (err instanceof StreamableHTTPError && typeof err.code === 'number' && err.code >= 400 && err.code < 500) {
    return new ToolRefusal('upstream_rejected', `The server refused the call with HTTP ${err.code}.`);
  }
  if (err instanceof McpConnectError) {
    if (err.attempts.every((a) => /timed out|timeout/i.test(a.error))) return new ToolRefusal('upstream_timeout', `The server did not answer within its \`timeout_ms\` (${server.timeoutMs} ms).`);
    return new ToolRefusal('upstream_unavailable', 'The server could not be reached.');
  }
  return new ToolRefusal('upstream_unavailable', 'The server could not be reached.');
}

/** Room beyond `max_result_bytes` for what else a session's answers carry: the handshake, the JSON-RPC envelope, SSE framing. */
const MCP_RESPONSE_SLACK_BYTES = 64 * 1024;

/** What one call leaves for the request log. */
type CallOutcome = { status: number; refusal?: ToolRefusal; resultBytes?: number; loggedArgs?: unknown; response?: unknown; guard?: RequestGuard };

/** Who a tool call's request-log row belongs to: the key, and the server the path named. */
type LogScope = {
  ctx: GatewayContext;
  key: KeyContext;
  services: GatewayServices;
  slug: string;
  /** Null when the path names no server this key may reach. */
  server: McpServerRow | null;
  /** Calls logged on this HTTP request so far: the first is logged under the request's id. */
  calls: number;
};

type Exchange = LogScope & {
  server: McpServerRow;
  grant: McpGrantRow;
  db: Database;
  /** Aborted when the agent hangs up before its answer: the upstream call is cancelled. */
  clientGone: AbortSignal;
};

/** One request-log row per tool call (endpoint `mcp.tools/call`), answered or refused. */
async function logCall(x: LogScope, name: string, tool: McpToolRow | null, started: number, outcome: CallOutcome & { error?: GatewayError }): Promise<void> {
  const config = await x.services.orgConfig.get(x.key.orgId).catch(() => null);
  const capture = config?.promptLoggingEnabled === true;
  const id = x.calls++ === 0 ? x.ctx.state.requestId : newId('req');
  const failure = outcome.refusal ?? outcome.error;
  const row: RequestLogEntry = {
    id, orgId: x.key.orgId, keyId: x.key.keyId, projectId: x.key.projectId, userId: null, sessionId: null, tags: {}, createdAt: new Date(),
    traceId: x.ctx.state.traceId ?? null,
    endpoint: MCP_CALL_ENDPOINT,
    // The tool the agent named, the upstream tool it reached, and the server (by slug and id).
    requestedModel: name,
    servedModel: tool?.upstreamName ?? null,
    routeSlug: x.slug,
    provider: MCP_LOG_PROVIDER,
    connectionId: x.server?.id ?? null,
    chainPosition: null,
    status: outcome.status,
    errorType: failure?.type ?? null,
    errorCode: failure?.code ?? null,
    stream: false,
    latencyMs: Math.round(performance.now() - started),
    attempts: [],
    usage: {
      server_id: x.server?.id ?? null, server_slug: x.slug, tool: name, upstream_tool: tool?.upstreamName ?? null,
      outcome: failure?.code ?? (failure ? failure.type : 'ok'), result_bytes: outcome.resultBytes ?? null,
    },
    cost: 0,
    priceSource: MCP_PRICE_SOURCE,
    guardrails: outcome.guard?.outcome() ?? null,
    requestBody: capture ? { name, arguments: outcome.loggedArgs ?? null } : null,
    responseBody: capture ? (outcome.response ?? null) : null,
  };
  if (x.ctx.state.trace?.recording) endRequestFromRow(x.ctx.state.trace, row);
  x.services.requestLog.record(row);
}

/** The `tools/call` messages of a body (JSON-RPC batches are arrays): what the server's rate limit counts. */
function toolCallsIn(body: unknown): { name: string; arguments: unknown }[] {
  const messages = Array.isArray(body) ? body : [body];
  return messages.flatMap((m) => {
    if (m === null || typeof m !== 'object' || (m as { method?: unknown }).method !== 'tools/call') return [];
    const params = (m as { params?: { name?: unknown; arguments?: unknown } }).params;
    return [{ name: typeof params?.name === 'string' ? params.name : '', arguments: params?.arguments ?? null }];
  });
}

/** Guardrails on the arguments: redacted in place, or `guardrail_blocked` / `guardrail_unavailable`. */
async function guardArguments(guard: RequestGuard, args: Record<string, unknown>): Promise<{ args: Record<string, unknown>; logged: unknown }> {
  const leaves = stringLeaves(args);
  const { messages, refusal } = await guard.checkInput(leaves.texts.map((content) => ({ role: 'user' as const, content })));
  const logged = guard.logMessages ? leaves.rebuild(guard.logMessages.map((m) => m.content as string)) : args;
  if (refusal) throw Object.assign(new ToolRefusal(refusal.code as 'guardrail_blocked', refusal.message), { logged });
  return { args: leaves.rebuild(messages.map((m) => m.content as string)) as Record<string, unknown>, logged };
}

/** Guardrails on the result: its texts redacted in place, or a refusal instead of it. */
async function guardResult(guard: RequestGuard, result: CallToolResult): Promise<CallToolResult> {
  const texts = resultTexts(result);
  const choices: Choice[] = texts.texts.map((content, index) => ({ index, message: { role: 'assistant', content }, finish_reason: 'stop' }));
  const refusal = await guard.checkAnswer(choices);
  if (refusal) throw new ToolRefusal(refusal.code as 'guardrail_blocked', refusal.message);
  return texts.rebuild(choices.map((c) => c.message.content ?? ''));
}

/** One `tools/call`: checked, guarded, sent upstream through the guarded path, checked again, logged. */
async function callTool(x: Exchange, name: string, rawArgs: Record<string, unknown> | undefined): Promise<CallToolResult> {
  const started = performance.now();
  const [tool] = await x.db.select().from(mcpServerTools).where(and(eq(mcpServerTools.serverId, x.server.id), eq(mcpServerTools.exposedName, name)));
  const args = rawArgs ?? {};
  // Arguments are logged only once guardrails have seen them (redacted), or when none apply: a
  // call refused before that step never stores what a rule might have matched.
  const outcome: CallOutcome = { status: 200, loggedArgs: null };
  try {
    const refused = refusalFor(x.grant, tool ?? null, name);
    if (refused) throw refused;
    const definition = tool!.approvedDefinition!;
    checkArguments(definition, tool!.approvedSha256!, args);
    const rules = await x.services.guardrails.rulesFor(x.key);
    if (rules) outcome.guard = new RequestGuard(rules, x.key.orgId);
    let sent = args;
    if (outcome.guard) {
      const guarded = await guardArguments(outcome.guard, args);
      sent = guarded.args;
      outcome.loggedArgs = guarded.logged;
    } else {
      outcome.loggedArgs = args;
    }
    let raw: unknown;
    // The session's answers are cut off past the result bound (plus room for the handshake and
    // the envelope), so an oversized result is refused while it arrives, not after it is buffered.
    let session: McpSession | null = null;
    const cut = { hit: false };
    const responseLimit: ResponseLimit = {
      bytes: x.server.maxResultBytes + MCP_RESPONSE_SLACK_BYTES,
      onExceeded: () => {
        cut.hit = true;
        void session?.close();
      },
    };
    try {
      session = await openServerSession(x.server, { sealer: x.services.sealer, dispatcher: x.services.agent }, { responseLimit });
      raw = await session.client.request({ method: 'tools/call', params: { name: tool!.upstreamName, arguments: sent } }, mcpTypes().ResultSchema, { timeout: x.server.timeoutMs, signal: x.clientGone });
    } catch (err) {
      if (cut.hit) throw new ToolRefusal('tool_result_too_large', `The tool's result is larger than this server's \`max_result_bytes\` (${x.server.maxResultBytes}).`);
      throw err;
    } finally {
      await (session as McpSession | null)?.close();
    }
    outcome.resultBytes = Buffer.byteLength(JSON.stringify(raw), 'utf8');
    let result = checkResult(raw, { maxResultBytes: x.server.maxResultBytes }, definition, tool!.approvedSha256!);
    if (outcome.guard) result = await guardResult(outcome.guard, result);
    outcome.response = outcome.guard?.logAnswer ? resultTexts(result).rebuild(outcome.guard.logAnswer) : result;
    return result;
  } catch (err) {
    const refusal = upstreamRefusal(err, x.server);
    if (!(err instanceof ToolRefusal) && !x.clientGone.aborted) x.ctx.state.log?.warn({ err: (err as Error)?.message, server_id: x.server.id }, 'tool call upstream failed');
    const logged = (err as { logged?: unknown }).logged;
    if (logged !== undefined) outcome.loggedArgs = logged;
    // An agent gone before its answer is logged as such (499, no error of ours), as chat does.
    if (x.clientGone.aborted) {
      outcome.status = 499;
      return refusal.toResult();
    }
    outcome.refusal = refusal;
    outcome.status = refusal.status;
    outcome.response = refusal.toResult().structuredContent;
    return refusal.toResult();
  } finally {
    await logCall(x, name, tool ?? null, started, outcome);
  }
}

/** The MCP server answering one HTTP request: `tools/list` and `tools/call` for this key and server. */
function agentServer(x: Exchange): Server {
  const { Server } = mcpServer();
  const { CallToolRequestSchema, ListToolsRequestSchema } = mcpTypes();
  const server = new Server({ name: `model-gateway/${x.server.slug}`, version: '1' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const tools = await listableTools(x.db, x.server.id);
    return { tools: tools.filter((t) => grantAllows(x.grant, t)).map(servedTool) };
  });
  server.setRequestHandler(CallToolRequestSchema, async (request) => callTool(x, request.params.name, request.params.arguments));
  return server;
}

/** Mounts `/v1/mcp/{server_slug}` on the /v1 router (after key auth, rate tier and JSON body). */
export function mcpRoutes(router: Router<GatewayState>, deps: McpRouteDeps): void {
  router.all('/mcp/:slug', async (ctx) => {
    const key = ctx.state.key!;
    const slug = ctx.params.slug!;
    // One message a request: a batch would put many tool calls under one count of the key's
    // rate tier, and the protocol dropped batching in its 2025-06-18 revision.
    if (ctx.method === 'POST' && Array.isArray(ctx.state.body)) {
      throw new GatewayError('invalid_request', 'JSON-RPC batches are not accepted here: send one message per request.');
    }
    const calls = ctx.method === 'POST' ? toolCallsIn(ctx.state.body) : [];
    let resolved: { server: McpServerRow; grant: McpGrantRow } | null = null;
    try {
      resolved = await resolveServer(deps.db, key, slug);
      for (let i = 0; i < calls.length; i++) await countServerCall(deps.gateway, resolved.server);
    } catch (err) {
      // A tools/call refused on the HTTP level (404, 403 `mcp_disabled`, 429) is still a call: logged.
      if (err instanceof GatewayError && calls.length > 0) {
        const scope: LogScope = { ctx, key, services: deps.gateway, slug, server: resolved?.server ?? null, calls: 0 };
        const started = performance.now();
        for (const c of calls) await logCall(scope, c.name, null, started, { status: err.status, error: err, loggedArgs: null });
      }
      throw err;
    }
    const { server, grant } = resolved;
    if (ctx.method !== 'POST') {
      // Stateless: no stream to resume (GET) and no session to end (DELETE).
      ctx.status = 405;
      ctx.set('Allow', 'POST');
      ctx.body = { error: { message: 'This MCP endpoint is stateless: send JSON-RPC messages with POST.', type: 'invalid_request_error', code: null } };
      return;
    }

    const gone = new AbortController();
    ctx.res.once('close', () => {
      if (!ctx.res.writableFinished) gone.abort();
    });
    const exchange: Exchange = { ctx, key, slug, server, grant, services: deps.gateway, db: deps.db, calls: 0, clientGone: gone.signal };
    const mcp = agentServer(exchange);
    const { StreamableHTTPServerTransport } = mcpStreamableHttpServerTransport();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await mcp.connect(transport);
    // The transport writes the answer itself; Koa must not.
    ctx.respond = false;
    const done = new Promise<void>((resolve) => {
      if (ctx.res.writableFinished || ctx.res.destroyed) resolve();
      else ctx.res.once('close', () => resolve());
    });
    try {
      await transport.handleRequest(ctx.req, ctx.res, ctx.state.body);
      await done;
    } finally {
      await transport.close().catch(() => undefined);
      await mcp.close().catch(() => undefined);
    }
  });
}
