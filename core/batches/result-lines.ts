import type { BatchItemOutcome } from '../db/schema';
import { newId } from '../ids';

/** How the batch ended, for the items it never ran. */
export type UnrunReason = { status: 'cancelled' | 'expired' } | { status: 'completed'; refusal: { statusCode: number; body: unknown } };

/** One item as finalize knows it: recorded (its answer), or never run. */
export type FinishedItem = { customId: string; outcome: BatchItemOutcome; statusCode: number | null; requestId: string | null; body: unknown } | { customId: string; outcome: null; attempted: boolean };

/**
 * An item called but never recorded: its worker died with the call in flight and the batch
 * ended (cancelled, expired, a limit) before another ran it. The provider may have billed it.
 */
const LOST = { code: 'batch_item_lost', message: 'This request was sent, but its answer was lost with the worker that sent it, and the batch ended before it was sent again. It may have been billed.' };

/** Which file a line goes to (OpenAI splits answers from errors; Anthropic keeps one results file) and its JSON. */
export type ResultLine = { file: 'output' | 'errors'; line: Record<string, unknown> };

/**
 * An item's line in OpenAI's output files: 2xx answers in the output file, the rest in the
 * error file with their response; items never run as OpenAI writes expired and cancelled ones
 * (`response: null`, `error.code`), or with the 402 the budget gave.
 */
export function openAIResultLine(item: FinishedItem, unrun: UnrunReason): ResultLine {
  const id = newId('breq');
  if (item.outcome === 'succeeded' || item.outcome === 'errored') {
    return { file: item.outcome === 'succeeded' ? 'output' : 'errors', line: { id, custom_id: item.customId, response: { status_code: item.statusCode, request_id: item.requestId, body: item.body }, error: null } };
  }
  if (item.outcome === null && item.attempted) return { file: 'errors', line: { id, custom_id: item.customId, response: null, error: LOST } };
  if (unrun.status === 'completed') return { file: 'errors', line: { id, custom_id: item.customId, response: { status_code: unrun.refusal.statusCode, request_id: null, body: unrun.refusal.body }, error: null } };
  const [code, message] = unrun.status === 'expired'
    ? ['batch_expired', 'This request could not be executed before the completion window expired.']
    : ['batch_cancelled', 'This request was not executed because the batch was cancelled.'];
  return { file: 'errors', line: { id, custom_id: item.customId, response: null, error: { code, message } } };
}

/**
 * An item's line in Anthropic's results (`{custom_id, result}`), every item in one file:
 * `succeeded` with the message, `errored` with the error answer (the budget's 402 for items it
 * stopped), `canceled` or `expired` for items never run.
 */
export function anthropicResultLine(item: FinishedItem, unrun: UnrunReason): ResultLine {
  const result = item.outcome === 'succeeded' ? { type: 'succeeded', message: item.body }
    : item.outcome === 'errored' ? { type: 'errored', error: item.body }
    : item.outcome === null && item.attempted ? { type: 'errored', error: { type: 'error', error: { type: 'api_error', message: LOST.message, code: LOST.code } } }
    : unrun.status === 'completed' ? { type: 'errored', error: unrun.refusal.body }
    : { type: unrun.status === 'expired' ? 'expired' : 'canceled' };
  return { file: 'output', line: { custom_id: item.customId, result } };
}
