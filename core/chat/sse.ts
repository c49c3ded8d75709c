import { createParser } from 'eventsource-parser';

export type SseEvent = { event?: string; data: string };

/** Server-sent events from a byte stream, as they complete. */
export async function* readSse(body: AsyncIterable<Buffer | Uint8Array>): AsyncGenerator<SseEvent> {
  const pending: SseEvent[] = [];
  const parser = createParser({ onEvent: (e) => pending.push({ event: e.event, data: e.data }) });
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    while (pending.length > 0) yield pending.shift()!;
  }
  parser.feed(decoder.decode());
  while (pending.length > 0) yield pending.shift()!;
}
