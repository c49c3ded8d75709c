import { and, inArray, type SQL } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { z } from 'zod';
import type { ManagementPrincipal } from '../../../core/auth/management-token-auth';
import type { Database, Executor } from '../../../core/db/client';
import type { MemberRole, Plan } from '../../../core/db/schema';
import type { GatewayError } from '../../../core/errors';
import { afterCursor, keysetOrder, timestampKey, type Cursor, type Keyset, type PageRequest } from '../../../core/paging';
import type { ManagementServices } from '../services';

/** A table the framework can version: it reads and writes these columns generically. */
export type VersionedTable = PgTable & { id: PgColumn; orgId: PgColumn; version: PgColumn; updatedAt: PgColumn };

/** A listed row with the cursor of its place in the list's order. */
export type Listed<Row> = { row: Row; cursor: Cursor };

/** The columns every versioned management row has. */
export type VersionedRow = { id: string; orgId: string; version: number; managedBy: string };

export type ResourceCall = {
  db: Executor;
  principal: ManagementPrincipal;
  now: Date;
  query: Record<string, string | string[] | undefined>;
  services: ManagementServices;
};

/** What a write changed, for the audit row: never sealed values. */
export type WriteResult<Row> = { row: Row; reveal?: Record<string, unknown>; auditDetail?: Record<string, unknown> };

/**
 * A resource-specific operation, `POST /<type>/{id}/<name>` (spec 4.4): rotate a key, replace
 * a credential, rotate a signing secret. The framework locks the row, checks If-Match, writes
 * `changes` as the row's next version, audits and answers `answer` (another row of the same
 * type, such as the new key) or the changed row, plus `reveal` (secrets shown once).
 */
export type ResourceAction<Row> = {
  summary: string;
  schema: z.ZodType;
  ifMatch: 'optional' | 'required';
  /**
   * Only a token whose creator is an owner or admin may take it (403 `token_creator_not_admin`),
   * checked with the scope, before the row is read.
   */
  adminCreator?: boolean;
  /** Extra wire fields of the answer, for the OpenAPI document. */
  revealSchema?: z.ZodType;
  /**
   * What calls out (a Temporal start, the provider's word on a credential), run on the row as
   * read before it is locked (`call.db` is outside any transaction): no network call waits inside a transaction holding the row's lock
   * (DESIGN 6.9). Its result reaches `run`; a row that changed in between is a 409
   * `version_conflict`. Whatever it starts must be harmless if the transaction then fails.
   */
  prepare?(call: ResourceCall, row: Row, input: never): Promise<unknown>;
  run(call: ResourceCall, row: Row, input: never, prepared: never): Promise<{
    changes?: Record<string, unknown>;
    answer?: Row;
    reveal?: Record<string, unknown>;
    auditDetail?: Record<string, unknown>;
  }>;
};

/**
 * An operation on the whole collection, `POST /<type>/<name>` (spec 4.4
 * `POST /mcp_servers/disable_all`). The framework checks scope, role, plan and gate, runs it in
 * one transaction with an audit row (`<type>.<name>`, resource id the organization's) and answers
 * its body.
 */
export type CollectionAction = {
  summary: string;
  schema: z.ZodType;
  /** The answer's wire shape, for the OpenAPI document. */
  answerSchema: z.ZodType;
  run(call: ResourceCall, input: never): Promise<{ body: Record<string, unknown>; auditDetail?: Record<string, unknown>; changedIds?: string[] }>;
};

/** One read-only list under a resource (`subLists`). */
export type SubList<Row> = {
  summary: string;
  /** One entry's wire shape, for the OpenAPI document. */
  itemSchema: z.ZodObject;
  list(db: Database, row: Row, page: PageRequest): Promise<Array<{ entry: Record<string, unknown>; cursor: Cursor }>>;
};

/** A write a plan gate is asked about, with its validated input where it has one. */
export type PlanGatedWrite =
  | { kind: 'create'; input: unknown }
  | { kind: 'patch'; input: unknown }
  | { kind: 'remove' }
  | { kind: 'action'; action: string; input: unknown };

/**
 * One management resource type: data plus a few functions. The framework (router.ts) owns
 * auth, scopes, If-Match, versions, idempotency, audit, invalidation and the wire envelope;
 * a resource owns only its fields and rules. An absent function means the operation is not
 * supported (400 operation_not_supported).
 */
export interface ResourceType<Row extends VersionedRow = VersionedRow> {
  /** Path segment and audit resource type, e.g. `projects`. */
  type: string;
  /** The `object` field of each answer, e.g. `project`. */
  object: string;
  /** Scope area: reads need `<scope>:read`, writes `<scope>:write`. */
  scope: string;
  /** One object per organization, read and patched at `/<type>` (its id is the organization's). */
  singleton?: boolean;
  /**
   * Records the product makes rather than configuration (findings): a data operation of spec 4.4,
   * answered without `version`, `managed_by` or ETag, and left out of `GET /export`.
   */
  data?: true;
  /** Where the rows live; absent for an attached resource (`storedIn`). */
  table?: VersionedTable;
  /**
   * An attached resource has no row of its own: it is a part of another resource's row (a
   * guardrail policy lives on its organization settings, project or key). Writes go to that
   * row and move its version, which is the attached resource's version too. Such a resource
   * creates by writing the parent itself and deletes by `{ hide }`, never 'delete'.
   */
  storedIn?(row: Row): { table: VersionedTable; id: string };
  /** The wire fields present() returns, for the OpenAPI document and response checks in tests. */
  readSchema: z.ZodObject;
  createSchema?: z.ZodType;
  /** Fields only the create answer carries (a secret shown once). */
  revealSchema?: z.ZodObject;
  patchSchema?: z.ZodType;
  /** Lowest creator role for writes; `member` when absent. */
  writeRole?: MemberRole;
  /**
   * The visible row with this id in the organization, or null (404 resource_not_found).
   * Actions ask with `includeHidden` so they can refuse a hidden row with their own error
   * (rotating a revoked key is 409 key_not_rotatable, not 404).
   */
  find(db: Executor, orgId: string, id: string, options: { forUpdate: boolean; includeHidden?: boolean }): Promise<Row | null>;
  /**
   * One page of the visible rows in the type's order (newest first by `(created_at, id)`
   * unless the type has a natural order), at most `page.limit + 1` of them so the framework
   * knows whether more follow (core/paging.ts). A project-restricted token's unreachable rows
   * are left out by the query itself, so a page is never short of rows that exist.
   */
  list?(db: Database, principal: ManagementPrincipal, page: PageRequest, filters: never): Promise<Listed<Row>[]>;
  /**
   * Query parameters the list narrows by (`GET /findings?status=open`), validated like a body
   * (400 naming the parameter) and handed to `list`; the OpenAPI document lists them too.
   * Not strict: the page's own `limit` and `after` pass beside them.
   */
  listFilters?: z.ZodObject;
  /**
   * Checks a create needs that take time outside our database (a credential checked with a
   * provider), run before the write's transaction so no connection or lock waits on them.
   */
  precheckCreate?(call: Omit<ResourceCall, 'db'>, input: never): Promise<unknown>;
  /** `prepared` is what `precheckCreate` answered (a server's tool listing), if anything. */
  create?(call: ResourceCall, input: never, prepared: never): Promise<WriteResult<Row>>;
  /** Column changes for a validated patch; the framework bumps the version and writes them. */
  patch?(call: ResourceCall, row: Row, input: never): Promise<Record<string, unknown>>;
  /**
   * What DELETE does: column changes the row keeps showing (a revoked key, an archived
   * project), `{ hide }` for changes after which the row is gone from reads (a soft delete),
   * or 'delete' to remove the row.
   */
  remove?(call: ResourceCall, row: Row): Promise<Record<string, unknown> | 'delete' | { hide: Record<string, unknown> }>;
  /** The 400 a unique index's violation means (a duplicate name), by constraint name. */
  uniqueConflict?(constraint: string): GatewayError | undefined;
  actions?: Record<string, ResourceAction<Row>>;
  /**
   * Read-only lists under one resource, `GET /<type>/{id}/<name>` (a cost-center rule's
   * versions), with the read scope and the list envelope. `list` answers at most `page.limit + 1`.
   */
  subLists?: Record<string, SubList<Row>>;
  collectionActions?: Record<string, CollectionAction>;
  /**
   * The lowest plan a write needs, or null when it is not plan-gated (spec 4.4: tool-gateway
   * writes need Team, enabling anything needs Business, disabling never is gated). The framework
   * checks it after scope and role, before anything is read or written: 403 `plan_feature`.
   * Absent: no write of the type is plan-gated.
   */
  planFor?(write: PlanGatedWrite): Plan | null;
  /**
   * A refusal that depends on the organization's settings rather than its plan (the tool gateway
   * turned off: 403 `mcp_disabled`), checked right after the plan, before the resource is read.
   */
  gate?(db: Executor, principal: ManagementPrincipal, write: PlanGatedWrite): Promise<void>;
  /** Project the row belongs to, for project-restricted tokens. */
  projectOf?(row: Row): string | null;
  /** The resource's own wire fields (the framework adds id, object, version, managed_by). */
  present(row: Row): Record<string, unknown>;
}

/** The one row a `find` selects, locked FOR UPDATE when the framework is about to write it. */
export async function selectOne<T>(query: PromiseLike<T[]> & { for(strength: 'update'): PromiseLike<T[]> }, forUpdate: boolean): Promise<T | null> {
  const [row] = forUpdate ? await query.for('update') : await query;
  return row ?? null;
}

/**
 * A page of a table's rows newest first by `(created_at, id)`, the order of every list without
 * a natural one. The cursor carries `created_at` to the microsecond (core/paging.ts).
 */
export async function newestFirst<Row extends { id: string }>(
  db: Executor,
  table: VersionedTable & { createdAt: PgColumn },
  where: SQL | undefined,
  page: PageRequest,
): Promise<Listed<Row>[]> {
  const keyset: Keyset = { key: table.createdAt, id: table.id, order: 'desc', type: 'timestamptz' };
  const rows = (await db
    .select({ row: table, at: timestampKey(table.createdAt) } as never)
    .from(table)
    .where(and(where, afterCursor(keyset, page.after)))
    .orderBy(...keysetOrder(keyset))
    .limit(page.limit + 1)) as unknown as { row: Row; at: string }[];
  return rows.map(({ row, at }) => ({ row, cursor: { at, id: row.id } }));
}

/** A restricted token's rows only (its projects), in the query; undefined for an unrestricted one. */
export function inProjects(projectIds: string[] | null | undefined, column: PgColumn): SQL | undefined {
  return projectIds ? inArray(column, projectIds) : undefined;
}
