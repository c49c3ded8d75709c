import { sql, type SQL } from 'drizzle-orm';
import type { KeyContext } from '../auth/gateway-key-auth';
import type { Database } from '../db/client';
import { DEFAULT_PROMPT_RETENTION_DAYS, gatewayKeys, orgSettings, storedResponses, type Plan } from '../db/schema';
import { GatewayError } from '../errors';
import { historyStart } from '../observability/history';

/**
 * Kept Responses (issue 35), one row a turn (issue 52): written when a response with
 * `store: true` completes, holding that turn's own input items and its response object and
 * naming the turn it continued; read whole for `GET /v1/responses/{id}`, and as the chain of
 * turns for `previous_response_id`.
 *
 * Who reads one is the request log's body rule (api/gateway/requests.ts), applied to the turn as
 * to the request that made it: a key reads what its own lineage made (the key and its rotations),
 * and what any other key of its organization made only with `observability_access: organization`
 * and `payload_access`, within its plan's history window. One exception, on purpose: a key's own
 * lineage continues, reads and deletes its own conversations without `payload_access` (and with
 * `observability_access: none`), since it sent those prompts and received those answers, and
 * continuing them is what `store` is for. Every read is also bounded by the organization's
 * prompt retention, read now. Anything else reads as not found, never as someone else's.
 */

/** Rows deleted per statement by the retention run. */
export const STORED_RESPONSE_DELETE_BATCH = 2_000;

/**
 * Turns a kept conversation may have. A continuation walks its turns one row at a time by
 * primary key, so this bounds that walk; agents that continue by `previous_response_id` take a
 * turn per tool round, and a few hundred rounds are ordinary.
 */
export const MAX_CONVERSATION_TURNS = 1_000;

/**
 * Bytes a kept conversation may hold (its turns' input items and response objects, as JSON).
 * A continuation sends the whole conversation to the provider in one request, and one request
 * from a client may be 28 MB (api/middleware/body.ts) while Anthropic takes at most 32 MB: a
 * conversation larger than this could not be sent whole anyway, and it bounds what one
 * continuation loads.
 */
export const MAX_CONVERSATION_BYTES = 32 * 1_000_000;

/** Who is reading kept responses, and what the request log would let it read of others' bodies. */
export type StoredResponseReader = {
  orgId: string;
  keyId: string;
  lineageId: string;
  /** `observability_access: organization`: others' turns too, given `payload_access` (read fresh, in the same statement). */
  organizationReach: boolean;
  /** The plan's history window: others' turns older than this the request log does not show. */
  othersSince: Date;
  now: Date;
};

export function storedResponseReader(key: Pick<KeyContext, 'orgId' | 'keyId' | 'lineageId' | 'observabilityAccess'>, plan: Plan, now: Date): StoredResponseReader {
  return { orgId: key.orgId, keyId: key.keyId, lineageId: key.lineageId, organizationReach: key.observabilityAccess === 'organization', othersSince: historyStart(plan, now), now };
}

/**
 * The oldest `created_at` still inside an organization's prompt retention at `now`, given how its
 * `prompt_logging_retention_days` is read (the row's own, with org_settings joined; or one
 * organization's, by a subquery).
 */
const retentionCutoff = (now: Date, days: SQL = sql`${orgSettings.promptLoggingRetentionDays}`) =>
  sql`${now.toISOString()}::timestamptz - make_interval(days => coalesce(${days}, ${DEFAULT_PROMPT_RETENTION_DAYS}))`;

/**
 * The condition a turn must meet for the reader: its organization, inside the retention (unless
 * `expiredToo`), and the request log's body rule. `turn` is the SQL name the row goes by in the
 * statement.
 */
function readable(reader: StoredResponseReader, turn: SQL, expiredToo = false): SQL {
  const column = (name: string) => sql`${turn}.${sql.identifier(name)}`;
  const cutoff = retentionCutoff(reader.now, sql`(select ${orgSettings.promptLoggingRetentionDays} from ${orgSettings} where ${orgSettings.id} = ${reader.orgId})`);
  const own = sql`${column('lineage_id')} = ${reader.lineageId}`;
  const whose = reader.organizationReach
    ? sql`(${own} or (${column('created_at')} >= ${reader.othersSince.toISOString()}::timestamptz and exists (select 1 from ${gatewayKeys} where ${gatewayKeys.id} = ${reader.keyId} and ${gatewayKeys.payloadAccess})))`
    : own;
  return expiredToo ? sql`${column('org_id')} = ${reader.orgId} and ${whose}` : sql`${column('org_id')} = ${reader.orgId} and ${column('created_at')} > ${cutoff} and ${whose}`;
}

const TURN = sql.raw('turn');

export type KeptTurn = {
  id: string;
  orgId: string;
  keyId: string;
  lineageId: string;
  /** The turn continued, with its depth and the conversation's bytes through it; null for a first turn. */
  previous: Pick<ConversationHead, 'id' | 'depth' | 'conversationBytes'> | null;
  /** This turn's own input items, as the request log keeps them. */
  input: Array<Record<string, unknown>>;
  response: Record<string, unknown>;
};

/**
 * Keeps one turn. Serialized here, once, so its size is counted from the very text stored; it
 * adds to the conversation's bytes even past MAX_CONVERSATION_BYTES (the bound is checked before
 * the turn is sent, by `checkConversationBounds`, and refuses the next one).
 */
export async function keepResponse(db: Database, turn: KeptTurn): Promise<void> {
  const input = JSON.stringify(turn.input);
  const response = JSON.stringify(turn.response);
  const bytes = Buffer.byteLength(input) + Buffer.byteLength(response);
  await db.insert(storedResponses).values({
    id: turn.id,
    orgId: turn.orgId,
    keyId: turn.keyId,
    lineageId: turn.lineageId,
    previousId: turn.previous?.id ?? null,
    depth: (turn.previous?.depth ?? 0) + 1,
    conversationBytes: (turn.previous?.conversationBytes ?? 0) + bytes,
    input: sql`${input}::jsonb`,
    response: sql`${response}::jsonb`,
  });
}

/** A kept response the reader may read, as answered (that turn's row only); null otherwise. */
export async function findStoredResponse(db: Database, reader: StoredResponseReader, id: string): Promise<Record<string, unknown> | null> {
  const { rows } = await db.execute<{ response: Record<string, unknown> }>(sql`
    select ${TURN}.response from ${storedResponses} as ${TURN} where ${TURN}.id = ${id} and ${readable(reader, TURN)}`);
  return rows[0]?.response ?? null;
}

/** What a continuation learns of the turn it continues before loading anything else. */
export type ConversationHead = { id: string; depth: number; conversationBytes: number };

/** The turn a continuation names, if the reader may read it: its depth and the conversation's bytes. */
export async function findConversationHead(db: Database, reader: StoredResponseReader, id: string): Promise<ConversationHead | null> {
  const { rows } = await db.execute<{ depth: number; conversation_bytes: string }>(sql`
    select ${TURN}.depth, ${TURN}.conversation_bytes from ${storedResponses} as ${TURN} where ${TURN}.id = ${id} and ${readable(reader, TURN)}`);
  const row = rows[0];
  return row ? { id, depth: row.depth, conversationBytes: Number(row.conversation_bytes) } : null;
}

/**
 * Refuses a continuation that would keep a conversation past its bounds (400, before anything
 * is sent or held): `conversation_too_long` past MAX_CONVERSATION_TURNS, `conversation_too_large`
 * when the bytes kept so far and this turn's input pass MAX_CONVERSATION_BYTES.
 */
export function checkConversationBounds(head: ConversationHead, inputBytes: number): void {
  if (head.depth >= MAX_CONVERSATION_TURNS) {
    throw new GatewayError('conversation_too_long', `The conversation of \`${head.id}\` already has ${head.depth} kept turns, the most one may have (${MAX_CONVERSATION_TURNS}); send the turn with \`store: false\`, or start a new conversation.`, { details: { param: 'previous_response_id' } });
  }
  if (head.conversationBytes + inputBytes > MAX_CONVERSATION_BYTES) {
    throw new GatewayError('conversation_too_large', `Keeping this turn would take the conversation of \`${head.id}\` past ${MAX_CONVERSATION_BYTES} bytes (${head.conversationBytes} kept so far, ${inputBytes} in this input); send the turn with \`store: false\`, or start a new conversation.`, { details: { param: 'previous_response_id' } });
  }
}

/**
 * Every item of the conversation through `head`, earliest turn first, each turn's input then its
 * output (not the rest of its response object); null when a turn of it is missing (expired or
 * deleted) or one the reader may not read. The walk reads ids only; the items are read once.
 */
export async function loadConversation(db: Database, reader: StoredResponseReader, head: ConversationHead): Promise<Array<Record<string, unknown>> | null> {
  const { rows } = await db.execute<{ input: Array<Record<string, unknown>>; output: Array<Record<string, unknown>> | null }>(sql`
    with recursive chain (id, previous_id, depth) as (
      select ${TURN}.id, ${TURN}.previous_id, ${TURN}.depth from ${storedResponses} as ${TURN}
        where ${TURN}.id = ${head.id} and ${readable(reader, TURN)}
      union all
      select ${TURN}.id, ${TURN}.previous_id, ${TURN}.depth from ${storedResponses} as ${TURN} join chain on ${TURN}.id = chain.previous_id
        where ${TURN}.depth = chain.depth - 1 and ${readable(reader, TURN)}
    )
    select stored.input, stored.response -> 'output' as output
      from chain join ${storedResponses} as stored on stored.id = chain.id
      order by chain.depth`);
  // Complete only when every turn from the first to this one was found.
  if (rows.length !== head.depth) return null;
  return rows.flatMap((r) => [...r.input, ...(r.output ?? [])]);
}

/**
 * Deletes one kept response the reader may read (that turn only; the later turns of its
 * conversation still read, but no longer continue); whether there was one. One past its
 * retention but not yet swept is deleted too: that only does sooner what the retention run will.
 */
export async function deleteStoredResponse(db: Database, reader: StoredResponseReader, id: string): Promise<boolean> {
  const { rowCount } = await db.execute(sql`
    delete from ${storedResponses} as ${TURN} where ${TURN}.id = ${id} and ${readable(reader, TURN, true)}`);
  return (rowCount ?? 0) > 0;
}

/**
 * Deletes kept responses past their organization's retention, a batch a statement, until none
 * is left or `budgetMs` has passed; answers how many and whether it finished. Turns expire one
 * by one, oldest first; a later turn whose earlier ones are gone still reads, but no longer
 * continues (`loadConversation`).
 */
export async function deleteExpiredStoredResponses(db: Database, now: Date, options: { budgetMs: number; batchRows?: number; onBatch?: () => void }): Promise<{ deleted: number; done: boolean }> {
  const batch = options.batchRows ?? STORED_RESPONSE_DELETE_BATCH;
  const started = Date.now();
  let deleted = 0;
  for (;;) {
    const { rowCount } = await db.execute(sql`
      delete from ${storedResponses} where ${storedResponses.id} in (
        select ${storedResponses.id} from ${storedResponses} left join ${orgSettings} on ${orgSettings.id} = ${storedResponses.orgId}
        where ${storedResponses.createdAt} <= ${retentionCutoff(now)}
        limit ${batch})`);
    deleted += rowCount ?? 0;
    options.onBatch?.();
    if ((rowCount ?? 0) < batch) return { deleted, done: true };
    if (Date.now() - started > options.budgetMs) return { deleted, done: false };
  }
}
