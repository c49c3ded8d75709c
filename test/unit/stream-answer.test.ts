import { PassThrough } from 'node:stream';
import type { LiveStream } from '../../core/chat/execute';
import type { ChunkChoice, StreamOutput } from '../../core/providers/types';
import { foldOutputs, relayStream, sseEvent, STREAM_HIGH_WATER_MARK, type StreamTally } from '../../api/gateway/stream-answer';

const delta = (content: string, finish: string | null = null): StreamOutput => ({ type: 'delta', choices: [{ index: 0, delta: { content }, finish_reason: finish } as ChunkChoice] });
const tally = (keepText: boolean): StreamTally => ({ model: 'm', usage: null, finished: false, outputBytes: 0, text: keepText ? [] : null });
const toChunk = (model: string, choices: ChunkChoice[]) => sseEvent({ model, content: choices[0]?.delta.content });

/** A live stream over fixed batches that counts how many batches were pulled. */
function live(batches: StreamOutput[][], options: { failAfter?: number } = {}): LiveStream & { pulled: () => number; aborted: () => boolean } {
  let pulled = 0;
  let aborted = false;
  async function* rest(): AsyncGenerator<StreamOutput[]> {
    for (const batch of batches) {
      if (options.failAfter !== undefined && pulled >= options.failAfter) throw Object.assign(new Error('body timeout'), { code: 'UND_ERR_BODY_TIMEOUT' });
      pulled += 1;
      yield batch;
    }
  }
  return { buffered: [], rest: rest(), abort: () => void (aborted = true), cutByGateway: () => false, pulled: () => pulled, aborted: () => aborted };
}

describe('relaying a stream (api/gateway/stream-answer)', () => {
  it('keeps the answer text only when asked to', () => {
    const kept = tally(true);
    const dropped = tally(false);
    foldOutputs(kept, [delta('Hello '), delta('there', 'stop')]);
    foldOutputs(dropped, [delta('Hello '), delta('there', 'stop')]);
    expect(kept.text).toEqual(['Hello ', 'there']);
    expect(dropped.text).toBeNull();
    expect([kept.finished, dropped.finished]).toEqual([true, true]);
  });

  it('counts the output relayed, text and tool-call arguments, whether or not the text is kept', () => {
    const t = tally(false);
    foldOutputs(t, [delta('héllo'), { type: 'delta', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { name: 'f', arguments: '{"a":1}' } }] }, finish_reason: null }] }]);
    expect(t.outputBytes).toBe(6 + 1 + 7);
  });

  it('tracks the model and usage, and ends at done or an error event', () => {
    const t = tally(false);
    const step = foldOutputs(t, [{ type: 'model', model: 'm2' }, delta('a'), { type: 'usage', usage: { prompt_tokens: 3 } }, { type: 'done' }, delta('after')]);
    expect(step.chunks).toEqual([{ model: 'm2', choices: expect.any(Array) }]);
    expect(step.end).toEqual({ phase: 'complete' });
    expect(t.usage).toEqual({ prompt_tokens: 3, completion_tokens: 0, total_tokens: 0 });
    const broken = foldOutputs(tally(false), [{ type: 'error', failure: { kind: 'server_error', message: 'x' } }]);
    expect(broken.end).toMatchObject({ phase: 'broken', error: { type: 'upstream_error' } });
  });

  it('pulls the next batch only once the client has taken the previous one', async () => {
    const batches = Array.from({ length: 50 }, (_, i) => [delta('x'.repeat(8_000) + i)]);
    const stream = live([...batches, [delta('', 'stop')]]);
    // Nobody reads `out` yet: its buffers (16 KB each side, as the chat path makes it) fill after a few batches.
    const out = new PassThrough({ highWaterMark: STREAM_HIGH_WATER_MARK });
    const ended = relayStream(stream, tally(false), out, new AbortController().signal, toChunk);
    await new Promise((r) => setTimeout(r, 100));
    expect(stream.pulled()).toBeLessThan(10);
    const received: string[] = [];
    out.setEncoding('utf8');
    out.on('data', (c: string) => received.push(c));
    await expect(ended).resolves.toEqual({ phase: 'complete' });
    expect(stream.pulled()).toBe(51);
    const contents = received.join('').split('\n\n').filter(Boolean).map((e) => (JSON.parse(e.slice(6)) as { content: string }).content);
    expect(contents.slice(0, 50)).toEqual(batches.map((_, i) => 'x'.repeat(8_000) + i));
  });

  it('ends as gone when the client leaves while the stream waits for it, and reads the rest unsent for the usage the provider bills (issue 54)', async () => {
    const usage = { prompt_tokens: 5, completion_tokens: 2_000, total_tokens: 2_005, completion_tokens_details: { reasoning_tokens: 1_900 } };
    const stream = live([...Array.from({ length: 20 }, () => [delta('y'.repeat(10_000))]), [delta('', 'stop')], [{ type: 'usage', usage }, { type: 'done' }]]);
    const out = new PassThrough();
    const gone = new AbortController();
    const t = tally(false);
    const ended = relayStream(stream, t, out, gone.signal, toChunk);
    await new Promise((r) => setTimeout(r, 50));
    const sent = out.readableLength;
    gone.abort();
    out.destroy();
    await expect(ended).resolves.toEqual({ phase: 'gone' });
    // Read to its end, never aborted, and nothing more sent to the gone client.
    expect(stream.pulled()).toBe(22);
    expect(stream.aborted()).toBe(false);
    expect([t.finished, t.usage]).toEqual([true, usage]);
    expect(out.readableLength).toBeLessThanOrEqual(sent);
  });

  it('ends as gone and cut when a stream read on after its client left stalls: its usage is not known (issue 54)', async () => {
    const stream = live(Array.from({ length: 20 }, () => [delta('z'.repeat(10_000))]), { failAfter: 10 });
    // Nobody reads `out`: the relay waits after a few batches, and the client leaves before the stall.
    const out = new PassThrough({ highWaterMark: STREAM_HIGH_WATER_MARK });
    const gone = new AbortController();
    const ended = relayStream(stream, tally(false), out, gone.signal, toChunk);
    await new Promise((r) => setTimeout(r, 50));
    expect(stream.pulled()).toBeLessThan(10);
    gone.abort();
    out.destroy();
    await expect(ended).resolves.toEqual({ phase: 'gone', cut: true });
  });

  it('never rejects: a read failure ends it as stalled or broken', async () => {
    const out = new PassThrough().resume();
    const stalled = await relayStream(live([[delta('a')], [delta('b')]], { failAfter: 1 }), tally(false), out, new AbortController().signal, toChunk);
    expect(stalled).toMatchObject({ phase: 'broken', error: { type: 'request_timeout', code: 'stream_stalled' } });
    const unfinished = await relayStream(live([[delta('a')]]), tally(false), out, new AbortController().signal, toChunk);
    expect(unfinished).toMatchObject({ phase: 'broken', error: { type: 'upstream_error' } });
  });
});
