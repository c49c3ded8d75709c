import { and, eq, ne, sql } from 'drizzle-orm';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Executor } from '../db/client';
import { mcpServerTools, type McpAccessClass, type McpScanFinding, type McpToolDefinition } from '../db/schema';
import { newId } from '../ids';
import { definitionSha256, toolDefinition } from './canonical';

export type McpToolRow = typeof mcpServerTools.$inferSelect;

/**
 * Longest exposed name: 64 characters, the most the common model APIs take for a function name
 * (and within MCP's 128).
 */
export const MCP_EXPOSED_NAME_MAX = 64;

/**
 * The name agents see for a server's tool: `<server slug>_<upstream name>`, with characters
 * outside `[A-Za-z0-9_-]` turned into `_` and cut at 64 characters. Slugs are unique in the
 * organization and hold no `_`, so two servers listing one name always get distinct names; only
 * folding or cutting within one server can collide, and then the later tool has no exposed name
 * (approve gives `mcp_tool_name_clash`).
 */
export function exposedNameFor(serverSlug: string, upstreamName: string): string {
  return `${serverSlug}_${upstreamName.replace(/[^A-Za-z0-9_-]/g, '_')}`.slice(0, MCP_EXPOSED_NAME_MAX);
}

/** `read` when the server says the tool only reads (`annotations.readOnlyHint`), else `write`. */
export function suggestedClassOf(definition: McpToolDefinition): McpAccessClass {
  const annotations = definition.annotations as { readOnlyHint?: unknown } | undefined;
  return annotations?.readOnlyHint === true ? 'read' : 'write';
}

/** Text in a tool's description or schema that tries to steer the model; flagged, never enforced. */
const SUSPICIOUS: { kind: string; pattern: RegExp }[] = [
  { kind: 'instruction_override', pattern: /\b(ignore|disregard|forget)\b.{0,40}\b(previous|prior|above|earlier|all)\b.{0,20}\b(instructions?|rules?|prompts?)\b/i },
  { kind: 'hidden_directive', pattern: /<\s*(important|system|secret|instructions?)\s*>/i },
  { kind: 'secrecy_request', pattern: /\b(do not|don't|never)\b.{0,30}\b(tell|mention|reveal|inform)\b.{0,30}\b(user|human)\b/i },
  { kind: 'credential_request', pattern: /\b(api[_ -]?key|password|private key|ssh key|\.env|id_rsa|access token)\b/i },
  { kind: 'invisible_characters', pattern: /[\u200B-\u200F\u202A-\u202E\u2060-\u2064\uFEFF]/ },
];

/** Simple findings over the definition's text (spec 2.6 `scan_findings`). */
export function scanDefinition(definition: McpToolDefinition): McpScanFinding[] {
  const text = JSON.stringify(definition);
  return SUSPICIOUS.filter((s) => s.pattern.test(text)).map((s) => ({ kind: s.kind, detail: `definition text matches ${s.kind.replace(/_/g, ' ')}` }));
}

export const NAME_CLASH_FINDING = 'exposed_name_clash';

/** A tool whose approved definition the server no longer matches: what an `mcp.tool_changed` alert names. */
export type ChangedTool = { id: string; upstreamName: string; exposedName: string | null; approvedSha256: string | null; definitionSha256: string };

export type ListingOutcome = { added: string[]; changed: ChangedTool[]; removed: string[]; updated: number };

/**
 * Applies one listing of a server's tools (spec 3.2), in the caller's transaction:
 * - a new tool is `pending`, with its definition, hash, suggested class and scan findings;
 * - an `approved` tool whose definition no longer equals the approved one becomes `changed`;
 * - a `changed` tool whose definition is the approved one again returns to `approved`;
 * - `pending` and blocked tools take the new definition and stay as they are;
 * - a tool no longer listed keeps its state but is marked not listed (approve: `mcp_tool_removed`;
 *   never served); listed again, it is marked listed.
 * The approved definition is never touched here: agents keep being served what was approved.
 */
export async function applyToolListing(db: Executor, server: { id: string; orgId: string; slug: string }, listed: Tool[], now: Date): Promise<ListingOutcome> {
  const existing = await db.select().from(mcpServerTools).where(eq(mcpServerTools.serverId, server.id)).for('update');
  const byName = new Map(existing.map((t) => [t.upstreamName, t]));
  const outcome: ListingOutcome = { added: [], changed: [], removed: [], updated: 0 };
  const seen = new Set<string>();

  for (const tool of listed) {
    if (seen.has(tool.name)) continue; // a server listing one name twice: the first counts
    seen.add(tool.name);
    const definition = toolDefinition(tool as unknown as McpToolDefinition);
    const sha = definitionSha256(definition);
    const row = byName.get(tool.name);
    if (!row) {
      const exposed = exposedNameFor(server.slug, tool.name);
      const [taken] = await db.select({ id: mcpServerTools.id }).from(mcpServerTools)
        .where(and(eq(mcpServerTools.orgId, server.orgId), eq(mcpServerTools.exposedName, exposed))).limit(1);
      const findings = scanDefinition(definition);
      if (taken) findings.push({ kind: NAME_CLASH_FINDING, detail: `exposed name \`${exposed}\` is already another tool's` });
      const id = newId('mcpt', now.getTime());
      await db.insert(mcpServerTools).values({
        id, orgId: server.orgId, serverId: server.id, upstreamName: tool.name, exposedName: taken ? null : exposed,
        state: 'pending', suggestedClass: suggestedClassOf(definition), definition, definitionSha256: sha,
        scanFindings: findings, firstSeenAt: now, createdAt: now, updatedAt: now,
      });
      outcome.added.push(id);
      continue;
    }
    const sameDefinition = row.definitionSha256 === sha && row.listed;
    let state = row.state;
    if (row.state === 'approved' && sha !== row.approvedSha256) state = 'changed';
    else if (row.state === 'changed' && sha === row.approvedSha256) state = 'approved';
    if (sameDefinition && state === row.state) continue;
    const clash = row.scanFindings.filter((f) => f.kind === NAME_CLASH_FINDING);
    await db.update(mcpServerTools).set({
      definition, definitionSha256: sha, suggestedClass: suggestedClassOf(definition), scanFindings: [...scanDefinition(definition), ...clash],
      state, listed: true, removedAt: null,
      ...(row.definitionSha256 !== sha && { changedAt: now }),
      version: sql`${mcpServerTools.version} + 1`, updatedAt: now,
    }).where(eq(mcpServerTools.id, row.id));
    outcome.updated++;
    if (state === 'changed' && row.state !== 'changed') {
      outcome.changed.push({ id: row.id, upstreamName: row.upstreamName, exposedName: row.exposedName, approvedSha256: row.approvedSha256, definitionSha256: sha });
    }
  }

  for (const row of existing) {
    if (seen.has(row.upstreamName) || !row.listed) continue;
    await db.update(mcpServerTools).set({ listed: false, removedAt: now, version: sql`${mcpServerTools.version} + 1`, updatedAt: now })
      .where(and(eq(mcpServerTools.id, row.id), ne(mcpServerTools.listed, false)));
    outcome.removed.push(row.id);
  }
  return outcome;
}

/**
 * The tools agents may be served for a server: approved, still listed, with an exposed name;
 * each with its approved definition (never a newer unapproved one) and access class.
 */
export async function servableTools(db: Executor, serverId: string): Promise<McpToolRow[]> {
  return db.select().from(mcpServerTools)
    .where(and(eq(mcpServerTools.serverId, serverId), eq(mcpServerTools.state, 'approved'), eq(mcpServerTools.listed, true), sql`${mcpServerTools.exposedName} is not null`));
}
