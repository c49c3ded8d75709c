import { and, eq } from 'drizzle-orm';
import type { Executor } from '../db/client';
import { mcpServers } from '../db/schema';
import type { McpServerRow } from './sync';

/** A registered server by its slug in the organization (any status), or null. */
export async function findServerBySlug(db: Executor, orgId: string, slug: string): Promise<McpServerRow | null> {
  const [row] = await db.select().from(mcpServers).where(and(eq(mcpServers.orgId, orgId), eq(mcpServers.slug, slug)));
  return row ?? null;
}

/**
 * Whether a key may reach a server by its scope (spec 2.6): the server is `active`, and its
 * `project_ids` and `environments` are empty or hold the key's project and environment. A key
 * with no environment reaches only servers open to every environment. Grants are checked apart.
 */
export function serverReachableBy(server: Pick<McpServerRow, 'status' | 'projectIds' | 'environments'>, key: { projectId: string; environment: string | null }): boolean {
  if (server.status !== 'active') return false;
  if (server.projectIds.length > 0 && !server.projectIds.includes(key.projectId)) return false;
  if (server.environments.length > 0 && (key.environment === null || !server.environments.includes(key.environment))) return false;
  return true;
}
