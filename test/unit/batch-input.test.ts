import { Readable } from 'node:stream';
import { InputCheck, MAX_BATCH_ITEMS, MAX_REPORTED_LINE_ERRORS, parseInputLine } from '../../core/batches/input-lines';
import { jsonlLines } from '../../core/batches/jsonl-reader';

const line = (fields: Record<string, unknown>) => JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: { model: 'm', messages: [] }, ...fields });

describe('a batch input line', () => {
  it('reads a good line into its item', () => {
    expect(parseInputLine(line({}), 3, '/v1/chat/completions')).toEqual({ line: 3, customId: 'a', body: { model: 'm', messages: [] } });
  });

  it.each([
    ['text that is not JSON', 'not json', 'invalid_json_line', null],
    ['a JSON array', '[1]', 'invalid_json_line', null],
    ['an empty custom_id', line({ custom_id: '' }), 'missing_required_parameter', 'custom_id'],
    ['a custom_id over 512 characters', line({ custom_id: 'x'.repeat(513) }), 'invalid_value', 'custom_id'],
    ['a GET', line({ method: 'GET' }), 'invalid_value', 'method'],
    ['another endpoint', line({ url: '/v1/embeddings' }), 'mismatched_endpoint', 'url'],
    ['a body that is not an object', line({ body: 'text' }), 'missing_required_parameter', 'body'],
    ['a body without model', line({ body: { messages: [] } }), 'missing_required_parameter', 'body.model'],
    ['a streamed body', line({ body: { model: 'm', stream: true } }), 'invalid_value', 'body.stream'],
  ])('refuses %s, naming the line and the field', (_label, text, code, param) => {
    expect(parseInputLine(text as string, 7, '/v1/chat/completions')).toEqual({ code, param, line: 7, message: expect.stringContaining('Line 7') });
  });
});

describe('a whole input', () => {
  it('counts items, skips blank lines, refuses a repeated custom_id', () => {
    const check = new InputCheck('/v1/chat/completions');
    check.take(line({ custom_id: 'a' }), 1);
    check.take('', 2);
    check.take(line({ custom_id: 'b' }), 3);
    check.take(line({ custom_id: 'a' }), 4);
    expect(check.items).toBe(2);
    expect(check.errors()).toEqual([expect.objectContaining({ code: 'duplicate_custom_id', line: 4 })]);
  });

  it('refuses a batch past 50,000 requests, and stops reading (and remembering ids) there', () => {
    const check = new InputCheck('/v1/chat/completions');
    let line = 0;
    while (!check.overLimit) check.take(JSON.stringify({ custom_id: `c${line}`, method: 'POST', url: '/v1/chat/completions', body: { model: 'm' } }), ++line);
    expect(line).toBe(MAX_BATCH_ITEMS + 1);
    expect(check.errors()).toEqual([expect.objectContaining({ code: 'too_many_requests', line: MAX_BATCH_ITEMS + 1 })]);
    expect(check.take(line.toString(), line + 1)).toBeNull();
  });

  it('refuses an empty input, and lists at most ten errors', () => {
    expect(new InputCheck('/v1/embeddings').errors()).toEqual([expect.objectContaining({ code: 'empty_file', line: null })]);
    const check = new InputCheck('/v1/chat/completions');
    for (let i = 1; i <= 25; i++) check.take('nope', i);
    expect(check.errors()).toHaveLength(MAX_REPORTED_LINE_ERRORS);
  });
});

describe('JSONL lines with their offsets', () => {
  const read = async (chunks: string[], options = {}) => {
    const out = [];
    for await (const l of jsonlLines(Readable.from(chunks.map((c) => Buffer.from(c))), options)) out.push(l);
    return out;
  };

  it('splits on newlines across chunks, drops a CR, keeps a last line without newline, counts bytes', async () => {
    expect(await read(['{"a":1}\r\n{"b"', ':"é"}\n', '\nlast'])).toEqual([
      { text: '{"a":1}', line: 1, offset: 0 },
      { text: '{"b":"é"}', line: 2, offset: 9 },
      { text: '', line: 3, offset: 20 },
      { text: 'last', line: 4, offset: 21 },
    ]);
  });

  it('numbers a stream opened part-way from where it starts', async () => {
    expect(await read(['x\ny\n'], { firstLine: 10, startOffset: 100 })).toEqual([
      { text: 'x', line: 10, offset: 100 },
      { text: 'y', line: 11, offset: 102 },
    ]);
  });
});
