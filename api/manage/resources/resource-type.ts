import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { z } from 'zod';
import type { ManagementPrincipal } from '../../../core/auth/management-token-auth';
import type { Database, Executor } from '../../../core/db/client';

/** A table the framework can version: it reads and writes these columns generically. */
export type VersionedTable = PgTable & { id: PgColumn; orgId: PgColumn; version: PgColumn; updatedAt: PgColumn };

/** The columns every versioned management row has. */
export type VersionedRow = { id: string; orgId: string; version: number; managedBy: string };

export type ResourceCall = {
  db: Executor;
  principal: ManagementPrincipal;
  now: Date;
  query: Record<string, string | string[] | undefined>;
};

/** What a write changed, for the audit row: never sealed values. */
export type WriteResult<Row> = { row: Row; reveal?: Record<string, unknown>; auditDetail?: Record<string, unknown> };

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
  table: VersionedTable;
  createSchema?: z.ZodType;
  patchSchema?: z.ZodType;
  /** The visible row with this id in the organization, or null (404 resource_not_found). */
  find(db: Executor, orgId: string, id: string, options: { forUpdate: boolean }): Promise<Row | null>;
  list?(db: Database, principal: ManagementPrincipal): Promise<Row[]>;
  create?(call: ResourceCall, input: never): Promise<WriteResult<Row>>;
  /** Column changes for a validated patch; the framework bumps the version and writes them. */
  patch?(call: ResourceCall, row: Row, input: never): Promise<Record<string, unknown>>;
  /** Column changes for a soft delete, or 'delete' to remove the row. */
  remove?(call: ResourceCall, row: Row): Promise<Record<string, unknown> | 'delete'>;
  /** Project the row belongs to, for project-restricted tokens. */
  projectOf?(row: Row): string | null;
  /** The resource's own wire fields (the framework adds id, object, version, managed_by). */
  present(row: Row): Record<string, unknown>;
}
