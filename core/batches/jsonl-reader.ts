import type { Readable } from 'node:stream';

/** One line of a JSONL file: its text (without the line ending), 1-based number and byte offset. */
export type JsonlLine = { text: string; line: number; offset: number };

/** A line longer than the chat endpoint's body limit cannot be an item the gateway would take. */
export const MAX_LINE_BYTES = 28_000_000;

/**
 * The lines of a JSONL stream with the byte offset each starts at, so a reader can later seek
 * to a line (readline gives neither offsets nor a bound on a line's length). Splits on `\n`,
 * drops a `\r` before it; a last line without a newline counts. `firstLine` and `startOffset`
 * number the lines of a stream opened part-way.
 */
export async function* jsonlLines(stream: Readable, options: { firstLine?: number; startOffset?: number } = {}): AsyncGenerator<JsonlLine> {
  let line = options.firstLine ?? 1;
  let offset = options.startOffset ?? 0;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const emit = (tail: Buffer): JsonlLine => {
    const whole = pending.length === 0 ? tail : Buffer.concat([...pending, tail]);
    pending = [];
    pendingBytes = 0;
    const end = whole.length > 0 && whole[whole.length - 1] === 0x0d ? whole.length - 1 : whole.length;
    const result = { text: whole.toString('utf8', 0, end), line, offset };
    line += 1;
    offset += whole.length + 1;
    return result;
  };
  for await (const chunk of stream) {
    const buffer = chunk as Buffer;
    let start = 0;
    for (let at = buffer.indexOf(0x0a, start); at !== -1; at = buffer.indexOf(0x0a, start)) {
      yield emit(buffer.subarray(start, at));
      start = at + 1;
    }
    if (start < buffer.length) {
      pending.push(buffer.subarray(start));
      pendingBytes += buffer.length - start;
      if (pendingBytes > MAX_LINE_BYTES) throw new LineTooLong(line);
    }
  }
  if (pendingBytes > 0) yield emit(Buffer.alloc(0));
}

export class LineTooLong extends Error {
  constructor(readonly line: number) {
    super(`line ${line} is longer than ${MAX_LINE_BYTES} bytes`);
  }
}
