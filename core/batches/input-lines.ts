import type { BatchLineError } from '../db/schema';
import { GATEWAY_RUN_FIELDS } from './native-wire';

/** The endpoints a batch's items may call, as OpenAI's `endpoint` names them. */
export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings', '/v1/responses'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number] | '/v1/messages';

/** OpenAI's bound on one batch (its Batch API: 50,000 requests in a file of up to 200 MB). */
export const MAX_BATCH_ITEMS = 50_000;
/** `custom_id` is the caller's key to its results; OpenAI gives no bound, Anthropic 64 characters of `[a-zA-Z0-9_-]`. */
export const MAX_CUSTOM_ID_LENGTH = 512;
/** A batch fails with the first this many line errors named (OpenAI lists several, not every one). */
export const MAX_REPORTED_LINE_ERRORS = 10;

/** One item as the batch runs it: its line (1-based, as the errors name it), its id and the request body. */
export type BatchInputItem = { line: number; customId: string; body: Record<string, unknown> };

const lineError = (line: number, code: string, message: string, param: string | null = null): BatchLineError => ({ code, message, param, line });

/**
 * Reads one line of an OpenAI batch input (`{custom_id, method, url, body}`) for a batch whose
 * items call `endpoint`; the error names the line and the field, as OpenAI's `errors.data[]`
 * does. A streamed item is refused: a batch's output is one answer per line.
 */
export function parseInputLine(text: string, line: number, endpoint: string): BatchInputItem | BatchLineError {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return lineError(line, 'invalid_json_line', `Line ${line} is not valid JSON.`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return lineError(line, 'invalid_json_line', `Line ${line} is not a JSON object.`);
  const item = value as Record<string, unknown>;
  const customId = item.custom_id;
  if (typeof customId !== 'string' || customId.length === 0) return lineError(line, 'missing_required_parameter', `Line ${line} has no \`custom_id\` string.`, 'custom_id');
  if (customId.length > MAX_CUSTOM_ID_LENGTH) return lineError(line, 'invalid_value', `Line ${line}'s \`custom_id\` is longer than ${MAX_CUSTOM_ID_LENGTH} characters.`, 'custom_id');
  if (item.method !== 'POST') return lineError(line, 'invalid_value', `Line ${line}'s \`method\` must be "POST".`, 'method');
  if (item.url !== endpoint) return lineError(line, 'mismatched_endpoint', `Line ${line}'s \`url\` is ${JSON.stringify(item.url)}; every line of this batch must call ${endpoint}.`, 'url');
  const body = item.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return lineError(line, 'missing_required_parameter', `Line ${line} has no \`body\` object.`, 'body');
  const fields = body as Record<string, unknown>;
  if (typeof fields.model !== 'string' || fields.model.length === 0) return lineError(line, 'missing_required_parameter', `Line ${line}'s body has no \`model\`.`, 'body.model');
  if (fields.stream === true) return lineError(line, 'invalid_value', `Line ${line} asks for a stream; a batch item answers whole.`, 'body.stream');
  return { line, customId, body: fields };
}

export function isLineError(parsed: BatchInputItem | BatchLineError): parsed is BatchLineError {
  return 'code' in parsed;
}

/**
 * Collects a whole input's refusals as its lines are read: each bad line, a `custom_id` seen
 * before, too many items, no item at all. `errors()` is empty when the batch may start.
 */
export class InputCheck {
  private readonly seen = new Set<string>();
  private readonly found: BatchLineError[] = [];
  private errorCount = 0;
  items = 0;
  /** The model every good item names; null once two differ (a batch sent to a provider's batch API is one model's). */
  model: string | null | undefined = undefined;
  /** Whether an item asks for the gateway's own routing or cache (`routing`, `fallbacks`, `cache`): then the gateway runs the batch. */
  needsGateway = false;

  constructor(private readonly endpoint: string) {}

  /** Past the bound the batch fails: the reader stops (and `seen` stops growing). */
  get overLimit(): boolean {
    return this.items > MAX_BATCH_ITEMS;
  }

  /** Reads one line; answers the item when it is good. Blank lines are skipped, as JSONL readers do. */
  take(text: string, line: number): BatchInputItem | null {
    if (text.trim() === '' || this.overLimit) return null;
    const parsed = parseInputLine(text, line, this.endpoint);
    if (isLineError(parsed)) return this.refuse(parsed);
    if (this.seen.has(parsed.customId)) return this.refuse(lineError(line, 'duplicate_custom_id', `Line ${line}'s \`custom_id\` ${JSON.stringify(parsed.customId)} appears on an earlier line; each must be unique in the batch.`, 'custom_id'));
    this.items += 1;
    if (this.overLimit) return this.refuse(lineError(line, 'too_many_requests', `A batch takes at most ${MAX_BATCH_ITEMS} requests; line ${line} is past that.`));
    this.seen.add(parsed.customId);
    const model = parsed.body.model as string;
    this.model = this.model === undefined || this.model === model ? model : null;
    this.needsGateway ||= GATEWAY_RUN_FIELDS.some((name) => parsed.body[name] !== undefined);
    return parsed;
  }

  errors(): BatchLineError[] {
    if (this.items === 0 && this.errorCount === 0) return [{ code: 'empty_file', message: 'The input file has no requests.', param: null, line: null }];
    return this.found;
  }

  private refuse(error: BatchLineError): null {
    this.errorCount += 1;
    if (this.found.length < MAX_REPORTED_LINE_ERRORS) this.found.push(error);
    return null;
  }
}
