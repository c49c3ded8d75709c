/** A body whose shape the splitter cannot follow: not an object, the field not an array, cut short. */
export class MalformedJsonBody extends Error {}

/** An element over the bound (the caller's largest request). */
export class ElementTooLarge extends Error {
  constructor(readonly index: number, limit: number) {
    super(`requests[${index}] is larger than ${limit} bytes`);
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;
const isSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
/** Keys of the top-level object are short; a longer one is read no further than this. */
const MAX_KEY_BYTES = 256;

/**
 * The elements of one array field of a streamed JSON object (`{"requests": [ ... ]}`), each as
 * its own text, for the caller to `JSON.parse` one at a time: an Anthropic batch body of up to
 * 256 MB is never held whole. The scan follows strings (escapes included), nesting and the
 * top-level keys only; every other field's value is skipped, and the elements' own syntax is
 * left to `JSON.parse`. Written here because the maintained streaming parser (stream-json) says
 * it is not made for untrusted input, which a request body is; this one holds at most one
 * element (bounded by `maxElementBytes`) and one key at a time.
 */
export async function* jsonArrayField(body: AsyncIterable<Uint8Array>, field: string, maxElementBytes: number): AsyncGenerator<string> {
  let depth = 0;
  let inString = false;
  let escaped = false;
  /** At depth 1: a string now would be a key. */
  let expectKey = false;
  let key: number[] | null = null;
  let lastKey: string | null = null;
  /** After the target field's colon: its value must open an array. */
  let targetNext = false;
  let inTarget = false;
  let sawTarget = false;
  let element: Buffer[] = [];
  let elementBytes = 0;
  let elementOpen = false;
  let index = 0;
  let done = false;

  const finishElement = (): string => {
    const text = Buffer.concat(element).toString('utf8').trim();
    element = [];
    elementBytes = 0;
    elementOpen = false;
    index += 1;
    return text;
  };

  for await (const raw of body) {
    const chunk = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
    let start = -1;
    const keep = (end: number) => {
      if (start < 0) return;
      const piece = chunk.subarray(start, end);
      elementBytes += piece.length;
      if (elementBytes > maxElementBytes) throw new ElementTooLarge(index, maxElementBytes);
      element.push(piece);
    };
    if (elementOpen) start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!;
      if (inString) {
        if (key && !escaped && b !== QUOTE && key.length < MAX_KEY_BYTES) key.push(b);
        if (escaped) escaped = false;
        else if (b === BACKSLASH) escaped = true;
        else if (b === QUOTE) {
          inString = false;
          if (key) {
            lastKey = Buffer.from(key).toString('utf8');
            key = null;
          }
        }
        continue;
      }
      if (done) {
        if (!isSpace(b)) throw new MalformedJsonBody('unexpected text after the body\'s object');
        continue;
      }
      if (inTarget && depth === 2 && !elementOpen) {
        if (isSpace(b) || b === COMMA) continue;
        if (b === CLOSE_BRACKET) {
          inTarget = false;
          depth = 1;
          continue;
        }
        elementOpen = true;
        start = i;
      }
      if (inTarget && depth === 2 && elementOpen && (b === COMMA || b === CLOSE_BRACKET)) {
        keep(i);
        start = -1;
        yield finishElement();
        if (b === CLOSE_BRACKET) {
          inTarget = false;
          depth = 1;
        }
        continue;
      }
      if (targetNext && !isSpace(b)) {
        targetNext = false;
        if (b !== OPEN_BRACKET) throw new MalformedJsonBody(`\`${field}\` must be an array`);
        inTarget = true;
        sawTarget = true;
        depth += 1;
        continue;
      }
      switch (b) {
        case QUOTE:
          inString = true;
          if (depth === 1 && expectKey) {
            key = [];
            expectKey = false;
          }
          break;
        case OPEN_BRACE:
        case OPEN_BRACKET:
          if (depth === 0 && b !== OPEN_BRACE) throw new MalformedJsonBody('the body must be a JSON object');
          depth += 1;
          if (depth === 1) expectKey = true;
          break;
        case CLOSE_BRACE:
        case CLOSE_BRACKET:
          depth -= 1;
          if (depth < 0) throw new MalformedJsonBody('unbalanced brackets');
          if (depth === 0) done = true;
          break;
        case COMMA:
          if (depth === 1) expectKey = true;
          break;
        case COLON:
          if (depth === 1 && lastKey === field && !sawTarget) targetNext = true;
          break;
        default:
          if (depth === 0 && !isSpace(b)) throw new MalformedJsonBody('the body must be a JSON object');
      }
    }
    if (elementOpen) keep(chunk.length);
  }
  if (!done) throw new MalformedJsonBody('the body ended before its object closed');
  if (!sawTarget) throw new MalformedJsonBody(`the body has no \`${field}\` array`);
}
