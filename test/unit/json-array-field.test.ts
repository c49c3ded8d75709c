import { ElementTooLarge, jsonArrayField, MalformedJsonBody } from '../../core/batches/json-array-field';

async function elements(text: string | string[], max = 1_000_000): Promise<unknown[]> {
  const chunks = (Array.isArray(text) ? text : [text]).map((t) => Buffer.from(t));
  const out: unknown[] = [];
  for await (const element of jsonArrayField((async function* () { yield* chunks; })(), 'requests', max)) out.push(JSON.parse(element));
  return out;
}

describe('the elements of a streamed JSON array field', () => {
  it('yields each element of `requests`, skipping other fields however nested', async () => {
    const body = { other: { requests: [9], s: 'a ] } { [ "quoted' }, requests: [{ custom_id: 'a', params: { x: '"]},[{' } }, 2, 'three', null, [1, [2]]], tail: [1, 2] };
    expect(await elements(JSON.stringify(body, null, 2))).toEqual(body.requests);
  });

  it('follows strings, escapes and multibyte characters across any chunk boundary', async () => {
    const text = JSON.stringify({ requests: [{ q: 'say \\"hi\\" ] }', e: 'é😀' }, { q: '\\\\' }] });
    const whole = await elements(text);
    const bytes = Buffer.from(text);
    for (let cut = 1; cut < bytes.length; cut += 1) {
      const out: unknown[] = [];
      for await (const element of jsonArrayField((async function* () { yield bytes.subarray(0, cut); yield bytes.subarray(cut); })(), 'requests', 1_000_000)) out.push(JSON.parse(element));
      expect(out).toEqual(whole);
    }
  });

  it('takes an empty array', async () => {
    expect(await elements('{"requests": []}')).toEqual([]);
  });

  it.each([
    ['an array body', '[1]'],
    ['no requests field', '{"x": [1]}'],
    ['requests not an array', '{"requests": {"a": 1}}'],
    ['a body cut short', '{"requests": [1, 2'],
    ['text after the object', '{"requests": []} x'],
  ])('refuses %s', async (_label, text) => {
    await expect(elements(text)).rejects.toBeInstanceOf(MalformedJsonBody);
  });

  it('refuses an element over the bound, naming its index', async () => {
    await expect(elements(JSON.stringify({ requests: [{ a: 1 }, { b: 'x'.repeat(100) }] }), 50)).rejects.toEqual(new ElementTooLarge(1, 50));
  });
});
