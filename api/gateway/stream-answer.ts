import type { Writable } from 'node:stream';
import type { LiveStream } from '../../core/chat/execute';
import { GatewayError } from '../../core/errors';
import type { ChunkChoice, StreamOutput, Usage } from '../../core/providers/types';
import { outputBytes } from './billed-usage';

/** How a relayed stream ended: every chunk sent and the answer complete, broken off, or the client gone. */
/** `gone` with `cut`: read on after its client left, then cut by the gateway (a stall, or the bound) before its usage was known. */
export type StreamEnd = { phase: 'complete' } | { phase: 'broken'; error: GatewayError } | { phase: 'gone'; cut?: true };

/** What a stream has told so far; `text` is kept only when the request log will store it. */
export type StreamTally = {
  model: string;
  usage: Usage | null;
  finished: boolean;
  /** UTF-8 bytes of output relayed so far (text and tool-call arguments): what an unfinished answer is settled on. */
  outputBytes: number;
  text: string[] | null;
  /**
   * Kept only when guardrails check the answer at its end: each choice's text, and the chunks
   * that finish a choice, held back so the check's finding can ride on them (spec 2.2).
   */
  guarded?: { texts: string[]; held: Array<{ model: string; choices: ChunkChoice[] }> };
};

/** A provider's own event, passed along to a client that speaks its wire (StreamOutput `native`). */
export type NativeEvent = { event: string; data: string };

type Step = { chunks: Array<{ model: string; choices: ChunkChoice[]; native?: NativeEvent }>; end: StreamEnd | null };

/** Folds one batch of outputs into the tally: the chunks to send, and the end if the batch ends the stream. */
export function foldOutputs(tally: StreamTally, outputs: readonly StreamOutput[]): Step {
  const chunks: Step['chunks'] = [];
  for (const o of outputs) {
    switch (o.type) {
      case 'model':
        tally.model = o.model;
        break;
      case 'usage':
        tally.usage = Object.assign({}, tally.usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }, o.usage) as Usage;
        break;
      case 'native':
        chunks.push({ model: tally.model, choices: [], native: { event: o.event, data: o.data } });
        break;
      case 'done':
        return { chunks, end: { phase: 'complete' } };
      case 'error':
        return { chunks, end: { phase: 'broken', error: new GatewayError('upstream_error', `The provider's stream failed mid-answer: ${o.failure.kind}.`) } };
      case 'delta':
        for (const c of o.choices) {
          if (c.finish_reason) tally.finished = true;
          tally.outputBytes += outputBytes(c.delta.content, c.delta.tool_calls);
          if (c.delta.content) tally.text?.push(c.delta.content);
          if (c.delta.content && tally.guarded) tally.guarded.texts[c.index] = (tally.guarded.texts[c.index] ?? '') + c.delta.content;
        }
        chunks.push({ model: tally.model, choices: o.choices });
        break;
    }
  }
  return { chunks, end: null };
}

/**
 * What a streamed answer may hold for a slow client, each side of its PassThrough, before the
 * upstream read waits (`sendEvent`): 16 KB, Node 20's default. Node 22 raised the default to
 * 64 KB, four times the memory each open stream may hold for a client that does not read.
 */
export const STREAM_HIGH_WATER_MARK = 16 * 1024;

/** One SSE `data:` event. */
export function sseEvent(payload: unknown): string {
  return `data: ${typeof payload === 'string' ? payload : JSON.stringify(payload)}\n\n`;
}

/**
 * Writes one event's SSE text and, when `out` is full (`write()` answered false), waits for `drain`, so a
 * slow client slows the upstream read instead of growing a buffer. A client gone (the signal,
 * or `out` closed) ends the wait too.
 */
export async function sendEvent(out: Writable, text: string, gone: AbortSignal): Promise<void> {
  if (out.write(text) || out.destroyed || gone.aborted) return;
  await new Promise<void>((resolve) => {
    const wake = () => {
      out.off('drain', wake);
      out.off('close', wake);
      gone.removeEventListener('abort', wake);
      resolve();
    };
    out.on('drain', wake);
    out.on('close', wake);
    gone.addEventListener('abort', wake);
  });
}

/** Whether a read failed because the stream stalled (undici's body timeout): the gateway cut it. */
function stalled(err: unknown): boolean {
  return (err as { code?: string }).code === 'UND_ERR_BODY_TIMEOUT';
}

function readFailure(err: unknown): GatewayError {
  return stalled(err)
    ? new GatewayError('stream_stalled', 'The provider stopped sending mid-answer.')
    : new GatewayError('upstream_error', 'The provider\'s stream broke off mid-answer.');
}

/**
 * Relays a live stream to `out` as a small state machine over its iterator: the events held
 * back before the first token, then one batch at a time, each read only once the previous one
 * has been taken by the client. It stays `streaming` until the provider says done or fails, the
 * input ends, or the client goes away (the rest is then read unsent, for its usage). It never rejects.
 */
export async function relayStream(
  live: LiveStream,
  tally: StreamTally,
  out: Writable,
  gone: AbortSignal,
  /** The SSE text of one batch of choice deltas (or of a provider's own event), in the client's wire. */
  toEvents: (model: string, choices: ChunkChoice[], native?: NativeEvent) => string,
): Promise<StreamEnd> {
  const deliver = async (outputs: readonly StreamOutput[]): Promise<StreamEnd | null> => {
    const { chunks, end } = foldOutputs(tally, outputs);
    for (const chunk of chunks) {
      if (gone.aborted) return { phase: 'gone' };
      if (tally.guarded && chunk.choices.some((c) => c.finish_reason)) {
        tally.guarded.held.push(chunk);
        continue;
      }
      const text = toEvents(chunk.model, chunk.choices, chunk.native);
      if (text) await sendEvent(out, text, gone);
    }
    return gone.aborted ? { phase: 'gone' } : end;
  };
  let end: StreamEnd | null;
  try {
    end = await deliver(live.buffered);
    while (!end) {
      const next = await live.rest.next();
      end = next.done
        ? tally.finished ? { phase: 'complete' } : { phase: 'broken', error: new GatewayError('upstream_error', 'The provider\'s stream ended before the answer was complete.') }
        : await deliver(next.value);
    }
  } catch (err) {
    end = gone.aborted ? { phase: 'gone' } : { phase: 'broken', error: readFailure(err) };
  }
  // A client gone at any point before the end makes the answer abandoned, not complete. The
  // provider finishes it, and bills it, all the same: it is read on to its end, unsent, for the
  // usage it reports (CLIENT_GONE_READ_MS bounds how long; past it the read breaks off).
  if (gone.aborted) {
    const cut = end.phase !== 'complete' && (await readToEnd(live, tally)) === 'cut';
    end = cut ? { phase: 'gone', cut } : { phase: 'gone' };
  }
  void live.rest.return(undefined).catch(() => undefined);
  return end;
}

/**
 * The rest of a stream whose client left, folded into the tally (usage, bytes) and sent nowhere.
 * `cut` when the gateway ended it first (a stall, or the bound): its usage is not known.
 */
async function readToEnd(live: LiveStream, tally: StreamTally): Promise<'ended' | 'cut'> {
  try {
    for (;;) {
      const next = await live.rest.next();
      if (next.done || foldOutputs(tally, next.value).end) return 'ended';
    }
  } catch (err) {
    // Broken off by the provider: what was read is what is known.
    return live.cutByGateway() || stalled(err) ? 'cut' : 'ended';
  }
}
