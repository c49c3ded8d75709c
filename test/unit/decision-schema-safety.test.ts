import { compileOutputSchema, schemaViolation } from '../../core/decisions/output-schema';
import { withoutCodeFence } from '../../core/decisions/answer';
import { MAX_SCHEMA_DEPTH, MAX_UNIQUE_ITEMS } from '../../core/json-schema/safe-ajv';
import { checkArguments } from '../../core/mcp/agent-call';

/**
 * Issue 33: a tenant's JSON Schema runs on the API's event loop, so nothing in one may take
 * more than linear time. Each case here never finishes on ajv's defaults (backtracking RegExp,
 * quadratic uniqueItems): a regression hangs the test rather than slowing it.
 */
describe('tenant schemas cannot stall the event loop', () => {
  const compile = (schema: Record<string, unknown>) => {
    const compiled = compileOutputSchema(schema);
    if (!compiled.ok) throw new Error(compiled.reason);
    return compiled.validate;
  };

  it('runs `pattern` on RE2: the catastrophic pattern answers on a long input, and a back-reference (which RE2 cannot run) is refused', () => {
    const validate = compile({ type: 'object', properties: { answer: { type: 'string', pattern: '^(a+)+$' } } });
    expect(schemaViolation(validate, { answer: `${'a'.repeat(50)}!` })).toContain('must match pattern');
    expect(schemaViolation(validate, { answer: `${'a'.repeat(100_000)}!` })).toContain('must match pattern');
    expect(schemaViolation(validate, { answer: 'aaaa' })).toBeNull();
    // JavaScript's RegExp takes `(a)\1`; RE2 has no back-references: the engine is RE2.
    const refused = compileOutputSchema({ type: 'object', properties: { x: { type: 'string', pattern: '(a)\\1' } } });
    expect(refused.ok).toBe(false);
  });

  it('runs `patternProperties` and `propertyNames` patterns on RE2 too', () => {
    const validate = compile({ type: 'object', patternProperties: { '^(a+)+$': { type: 'number' } }, propertyNames: { pattern: '^(b|b)+$|^(a+)+$' } });
    expect(schemaViolation(validate, { [`${'a'.repeat(50_000)}!`]: 1 })).not.toBeNull();
    expect(schemaViolation(validate, { aaa: 1 })).toBeNull();
  });

  it('checks uniqueItems in linear time (one canonical text per item), with the same equality as ajv', () => {
    const validate = compile({ type: 'object', properties: { items: { type: 'array', uniqueItems: true } } });
    const long = Array.from({ length: MAX_UNIQUE_ITEMS }, (_, i) => ({ n: i, text: 'x'.repeat(20) }));
    expect(schemaViolation(validate, { items: long })).toBeNull();
    expect(schemaViolation(validate, { items: [...long.slice(1), { text: 'x'.repeat(20), n: 7 }] })).toContain('duplicate');
    // Past the bound an array is refused by its length alone.
    expect(schemaViolation(validate, { items: [...long, { n: -1 }] })).toContain(`more than ${MAX_UNIQUE_ITEMS} items`);
    // Key order does not make two objects different; 1 and 1.0 are one number in JSON.
    expect(schemaViolation(validate, { items: [{ a: 1, b: [1, 2] }, { b: [1, 2.0], a: 1 }] })).toContain('duplicate');
    expect(schemaViolation(validate, { items: [{ a: 1 }, { a: '1' }, [1], 1, '1', null] })).toBeNull();
  });

  it('refuses schemas too deep or too large, and keeps references as functions (no inlining)', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let i = 0; i < MAX_SCHEMA_DEPTH; i++) deep = { type: 'object', properties: { x: deep } };
    expect(compileOutputSchema(deep)).toMatchObject({ ok: false, reason: expect.stringContaining('deeper') });
    const wide = { type: 'object', properties: Object.fromEntries(Array.from({ length: 2_500 }, (_, i) => [`p${i}`, { type: 'string' }])) };
    expect(compileOutputSchema(wide)).toMatchObject({ ok: false });
    // One definition used 200 times: inlined, the code would hold 200 copies of it.
    const shared = { type: 'object', properties: Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`f${i}`, { type: 'string', minLength: 1, maxLength: 9 }])) };
    const uses = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`u${i}`, { $ref: '#/definitions/shared' }]));
    const withRefs = compile({ type: 'object', definitions: { shared }, properties: uses });
    expect(withRefs.toString().length).toBeLessThan(200_000);
    expect(schemaViolation(withRefs, { u3: { f1: '' } })).toContain('/u3/f1');
  });

  it('checks MCP tool arguments with the same engine', () => {
    const definition = { name: 't', inputSchema: { type: 'object', properties: { q: { type: 'string', pattern: '^(a+)+$' } } } };
    expect(() => checkArguments(definition as never, 'sha-safe-1', { q: `${'a'.repeat(100_000)}!` })).toThrow(/do not match/);
    expect(() => checkArguments(definition as never, 'sha-safe-1', { q: 'aaa' })).not.toThrow();
    // Too costly to check is not valid, also where no match would pass (issue 52).
    const deny = { name: 'd', inputSchema: { type: 'object', properties: { q: { type: 'string', not: { pattern: '(?:\\pL|\\s)*DROP TABLE' } } } } };
    expect(() => checkArguments(deny as never, 'sha-safe-2', { q: `DROP TABLE x${' '.repeat(600_000)}` })).toThrow(/too long to check/);
    expect(() => checkArguments(deny as never, 'sha-safe-2', { q: 'select 1' })).not.toThrow();
  });

  it('takes a code fence off an answer in linear time', () => {
    expect(withoutCodeFence('```json\n{"a":1}\n```')).toBe('{"a":1}');
    expect(withoutCodeFence('```\n{"a":1}```')).toBe('{"a":1}');
    expect(withoutCodeFence('{"a":1}')).toBe('{"a":1}');
    // An opening fence with a long run of white space and no closing fence.
    const hostile = `\`\`\`${' \n'.repeat(200_000)}x`;
    expect(withoutCodeFence(hostile)).toBe(hostile);
  });

  describe('patterns within the bounds, on the event loop (issue 52)', () => {
    /** 1,000 instructions, every one busy on a run of letters. */
    const AT_BOUND = '\\pL+\\pL{995}\\d';
    const letters = (n: number) => Array.from({ length: n }, (_, i) => 'abcdefghijklmnopqrstuvwxyzéαβγδε'[i % 32]).join('');

    it('does not search a string too costly to check: the value is not valid, whatever the pattern would have said', () => {
      const validate = compile({ type: 'object', properties: { code: { type: 'string', pattern: AT_BOUND } } });
      // It would match: 200,000 letters and a digit. 1,000 instructions over it is about 7 s at worst.
      expect(schemaViolation(validate, { code: `${letters(200_000)}1` })).toMatch(/too long to check/);
      // Short enough, the same pattern is searched, and matches.
      expect(schemaViolation(validate, { code: `${letters(1_000)}1` })).toBeNull();
    });

    it('a search not made is no "no match": a deny pattern under `not`, or a `patternProperties` key, cannot be got round with a long string', () => {
      const deny = compile({ type: 'object', properties: { command: { type: 'string', not: { pattern: '(?:\\pL|\\s)*rm -rf' } } } });
      expect(schemaViolation(deny, { command: 'rm -rf /' })).not.toBeNull();
      expect(schemaViolation(deny, { command: `rm -rf /${' '.repeat(600_000)}` })).toMatch(/too long to check/);
      const typed = compile({ type: 'object', patternProperties: { '^(?:\\pL|\\d)*secret': { type: 'integer' } } });
      expect(schemaViolation(typed, { secret: 'x' })).not.toBeNull();
      expect(schemaViolation(typed, { [`secret${'x'.repeat(600_000)}`]: 'x' })).toMatch(/too long to check/);
    });

    it('stops once a validation has spent its budget: many strings cannot add up to a stall', () => {
      const validate = compile({ type: 'object', properties: { codes: { type: 'array', items: { type: 'string', pattern: AT_BOUND } } } });
      // Every string matches; each search is about 60 ms at worst, 1,000 of them a minute.
      const answer = { codes: Array.from({ length: 1_000 }, () => `${letters(1_999)}1`) };
      expect(schemaViolation(validate, answer)).toMatch(/too many or too long to check/);
      // Three of them are within the budget (6,000,000 instruction-characters: 2,000 a string, 1,000 instructions).
      expect(schemaViolation(validate, { codes: answer.codes.slice(0, 3) })).toBeNull();
    });
  });
});
