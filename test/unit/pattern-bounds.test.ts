import { RE2JS } from 're2js';
import type { GuardrailPolicy } from '../../core/db/schema';
import { compileOutputSchema, schemaViolation } from '../../core/decisions/output-schema';
import { BUILTIN_DETECTORS } from '../../core/guardrails/detectors';
import { compilePolicy, mergePolicies, scan } from '../../core/guardrails/engine';
import { regexOffload } from '../../core/guardrails/regex-offload';
import { guardrailRuleSchema, guardrailRulesSchema } from '../../core/guardrails/rules';
import { checkArguments, toolSchemaProblem } from '../../core/mcp/agent-call';
import { programSizeBound } from '../../core/patterns/program-size';
import { compileUserPattern, MAX_PATTERN_CHARS, MAX_PATTERN_PROGRAM, MAX_PATTERNS_PER_SET, MAX_SET_PROGRAM } from '../../core/patterns/user-pattern';

/**
 * Issue 52: RE2's cost is its program's size times the input, and nothing bounded the program.
 * The review's cases: a 5.5 KB `pattern` (seconds to compile, then tens of ms per input
 * character), 1,900 `patternProperties` (54 KB, 5.5 s to compile), and a 496-character guardrail
 * rule that took 26 s to scan a 2,000-character prompt. Each is refused before it is compiled.
 * The inputs are sized so that, without the bounds, a case is accepted quickly (and the test
 * fails) rather than compiling for seconds.
 */

/** The review's 5.5 KB pattern, with a program small enough to compile quickly where unbounded. */
const LONG_PATTERN = '[a-z]{0,9}'.repeat(550);
/** 1,900 `patternProperties` keys, about 54 KB of schema. */
const MANY_PATTERN_PROPERTIES = Object.fromEntries(Array.from({ length: 1_900 }, (_, i) => [`^f${i}x$`, { type: 'string' }]));
/** 496 characters, about 98,000 RE2 instructions: `\w{0,1000}` is 2,001 of them. */
const HUGE_RULE = `${'\\w{0,1000}'.repeat(49)}\\s\\d\\s`;

const re2Compile = () => jest.spyOn(RE2JS, 'compile');
afterEach(() => jest.restoreAllMocks());
// Scans too large for the event loop went to the process's regex thread.
afterAll(() => regexOffload().close());

describe('the program a pattern compiles to, counted from its source', () => {
  /** A deterministic generator (no flaky seeds): a small LCG. */
  function generator(seed: number) {
    let state = seed;
    const next = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
    const pick = <T>(items: readonly T[]) => items[Math.floor(next() * items.length)]!;
    const atoms = ['a', 'b', '.', '\\d', '\\w', '[a-z]', '[^]x]', '[[:digit:]]', '\\pL', '\\p{Greek}', '\\x{41}', '\\Qa(b\\E', '^', '$', '\\b', '[\\]]', '😀', '\\.', '{', '}', ',', '\\012'];
    const repeats = ['', '', '', '*', '+', '?', '*?', '{2}', '{0,3}', '{3,}', '{1,5}', '{0}', '{,2}', '{7}', '{10,40}', '{30}', '{5,}'];
    const pattern = (depth: number): string => {
      const parts: string[] = [];
      for (let n = 1 + Math.floor(next() * 4); n > 0; n--) {
        const r = next();
        let atom: string;
        if (depth > 0 && r < 0.3) atom = `${pick(['(', '(?:', '(?i:', `(?P<g${n}d${depth}>`])}${pattern(depth - 1)})`;
        else if (depth > 0 && r < 0.4) atom = `(?:${pattern(depth - 1)}|${pattern(depth - 1)})`;
        else atom = pick(atoms);
        if (next() < 0.1) parts.push('(?i)');
        parts.push(atom + pick(repeats));
      }
      return parts.join(next() < 0.1 ? '|' : '');
    };
    return { pattern, next };
  }

  it('never counts fewer instructions than re2js compiles, on 3,000 generated patterns', () => {
    const { pattern, next } = generator(52);
    let compared = 0;
    for (let i = 0; i < 3_000; i++) {
      const source = pattern(3);
      let exact: number;
      try {
        exact = RE2JS.compile(source, next() < 0.3 ? RE2JS.CASE_INSENSITIVE : 0).programSize();
      } catch {
        continue;
      }
      compared++;
      if (programSizeBound(source) < exact) throw new Error(`undercounted ${source}: ${programSizeBound(source)} < ${exact}`);
    }
    expect(compared).toBeGreaterThan(2_000);
  });

  it('counts what repetition and case folding make of a short source, and common patterns as re2js does', () => {
    for (const source of ['a{1000}', '(?i)a{1000}', '(?:[a-z]{1,30}[0-9]{1,30}){1,15}', '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$', '\\b\\d{3}-\\d{2}-\\d{4}\\b']) {
      expect([source, programSizeBound(source)]).toEqual([source, RE2JS.compile(source).programSize()]);
    }
    expect(programSizeBound(HUGE_RULE)).toBeGreaterThan(90_000);
  });
});

describe('one pattern', () => {
  it('is refused past its length or its program, without being compiled', () => {
    const compile = re2Compile();
    expect(() => compileUserPattern('a'.repeat(MAX_PATTERN_CHARS + 1))).toThrow(/characters long/);
    // Eleven characters; the bound is on the compiled program, not the source.
    expect(() => compileUserPattern('(?i)x{1000}y')).toThrow(/about 1003 RE2 instructions; at most 1000/);
    expect(() => compileUserPattern(HUGE_RULE, true)).toThrow(/RE2 instructions/);
    expect(compile).not.toHaveBeenCalled();
  });

  it('compiles at the bound', () => {
    expect(compileUserPattern(`x{${MAX_PATTERN_PROGRAM - 2}}`).programSize()).toBe(MAX_PATTERN_PROGRAM);
    // The long IPv6 pattern (661 characters, 967 instructions) is within it.
    const ipv6 = '^(([0-9a-fA-F]{1,4}:){7,7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-fA-F]{1,4}){1,7}|:)|fe80:(:[0-9a-fA-F]{0,4}){0,4}%[0-9a-zA-Z]{1,}|::(ffff(:0{1,4}){0,1}:){0,1}((25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\\.){3,3}(25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])|([0-9a-fA-F]{1,4}:){1,4}:((25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\\.){3,3}(25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9]))$';
    expect(compileUserPattern(ipv6).test('fe80::1')).toBe(true);
  });
});

describe('a schema\'s patterns (decision policies, tool schemas)', () => {
  it('refuses the review\'s 5.5 KB pattern, naming where it is, without compiling it', () => {
    const compile = re2Compile();
    const refused = compileOutputSchema({ type: 'object', properties: { code: { type: 'string', pattern: LONG_PATTERN } } });
    expect(refused).toEqual({ ok: false, reason: `the pattern at \`/properties/code/pattern\` is ${LONG_PATTERN.length} characters long; at most ${MAX_PATTERN_CHARS}` });
    expect(compile).not.toHaveBeenCalled();
  });

  it('refuses a pattern whose program is past the bound though its source is short', () => {
    const refused = compileOutputSchema({ type: 'object', properties: { list: { type: 'array', items: { type: 'string', pattern: HUGE_RULE } } } });
    expect(refused).toMatchObject({ ok: false, reason: expect.stringMatching(/^the pattern at `\/properties\/list\/items\/pattern` compiles to about \d+ RE2 instructions/) });
  });

  it('refuses the review\'s 1,900 patternProperties (54 KB), naming the first one too many', () => {
    const schema = { type: 'object', patternProperties: MANY_PATTERN_PROPERTIES };
    expect(JSON.stringify(schema).length).toBeGreaterThan(53_000);
    const compile = re2Compile();
    const refused = compileOutputSchema(schema);
    expect(refused).toEqual({ ok: false, reason: `the pattern at \`/patternProperties/^f${MAX_PATTERNS_PER_SET}x$\` is one too many: at most ${MAX_PATTERNS_PER_SET} distinct patterns in one schema or policy` });
    expect(compile).not.toHaveBeenCalled();
  });

  it('bounds the patterns of one schema together, wherever they are; a pattern used twice counts once', () => {
    const near = `y{${MAX_PATTERN_PROGRAM - 2}}`; // one pattern at the bound
    const within = compileOutputSchema({
      type: 'object',
      properties: { a: { type: 'string', pattern: near }, b: { type: 'string', pattern: near } },
      // `^`, `$` and the program's fail and match: the two patterns make exactly the bound.
      patternProperties: { [`^z{${MAX_SET_PROGRAM - MAX_PATTERN_PROGRAM - 4}}$`]: {} },
      additionalProperties: false,
    });
    expect(within.ok).toBe(true);
    const past = compileOutputSchema({ type: 'object', definitions: { d: { type: 'string', pattern: near } }, properties: { a: { type: 'string', pattern: near.replace('y', 'w') }, b: { $ref: '#/definitions/d' } }, anyOf: [{ properties: { c: { pattern: 'q{10}' } } }] });
    expect(past).toMatchObject({ ok: false, reason: expect.stringContaining(`at \`/anyOf/0/properties/c/pattern\` brings the patterns to about ${2 * MAX_PATTERN_PROGRAM + 12} RE2 instructions together; at most ${MAX_SET_PROGRAM}`) });
    // Data is not a pattern, and a property may be called `pattern`.
    const data = compileOutputSchema({ type: 'object', properties: { pattern: { type: 'string', const: LONG_PATTERN, default: LONG_PATTERN, enum: [{ pattern: LONG_PATTERN }] } } });
    expect(data.ok).toBe(true);
  });

  it('searches a schema\'s patterns without re2js\'s lazy DFA, whose states a crafted answer would pile up in the cached validator', () => {
    const validate = compileOutputSchema({ type: 'object', properties: { ab: { type: 'string', pattern: '(?:a|b)*a(?:a|b){14}$' } }, patternProperties: { '^k\\d$': {} }, additionalProperties: false });
    if (!validate.ok) throw new Error(validate.reason);
    const dfaSearch = jest.spyOn(RE2JS.prototype, 'test');
    let seed = 7;
    const ab = Array.from({ length: 20_000 }, () => ((seed = (seed * 1103515245 + 12345) % 2147483648) < 1 << 30 ? 'a' : 'b')).join('');
    expect(schemaViolation(validate.validate, { ab: `${ab}a${'b'.repeat(14)}`, k1: 1 })).toBeNull();
    expect(schemaViolation(validate.validate, { ab: `${ab}b${'b'.repeat(14)}` })).toContain('must match pattern');
    expect(schemaViolation(validate.validate, { kk: 1 })).toContain('must NOT have additional properties');
    expect(dfaSearch).not.toHaveBeenCalled();
  });

  it('refuses a tool schema past the bounds at approve (naming the field) and on a call, never compiling it', () => {
    const definition = { name: 't', inputSchema: { type: 'object', properties: { q: { type: 'string', pattern: HUGE_RULE } } } };
    const compile = re2Compile();
    expect(toolSchemaProblem(definition)).toMatch(/^`definition\.inputSchema`: the pattern at `\/properties\/q\/pattern` compiles to about \d+ RE2 instructions/);
    expect(toolSchemaProblem({ name: 'o', outputSchema: { type: 'object', patternProperties: MANY_PATTERN_PROPERTIES } })).toMatch(/^`definition\.outputSchema`: .* one too many/);
    expect(() => checkArguments(definition as never, 'sha-bounds-1', { q: 'x' })).toThrow(/cannot be used to check arguments .*RE2 instructions/);
    expect(compile).not.toHaveBeenCalled();
    expect(toolSchemaProblem({ name: 'ok', inputSchema: { type: 'object', properties: { q: { type: 'string', pattern: '^[a-z]+$' } } } })).toBeNull();
  });
});

describe('a guardrail policy\'s patterns', () => {
  const regex = (patterns: string[], extra: Record<string, unknown> = {}) => ({ detector: 'regex', stage: 'input', action: 'block', patterns, ...extra });

  it('refuses the review\'s 496-character rule, naming the pattern, without compiling it', () => {
    expect(HUGE_RULE).toHaveLength(496);
    const compile = re2Compile();
    const rule = guardrailRuleSchema.safeParse(regex([HUGE_RULE], { case_insensitive: true }));
    expect(rule.error?.issues).toEqual([expect.objectContaining({ path: ['patterns', 0], message: expect.stringMatching(/^the pattern compiles to about \d+ RE2 instructions; at most 1000/) })]);
    const policy = guardrailRulesSchema.safeParse([{ detector: 'email', stage: 'input', action: 'flag' }, regex(['ok\\d+', HUGE_RULE])]);
    expect(policy.error?.issues.map((i) => i.path)).toEqual([[1, 'patterns', 1]]);
    expect(compile).not.toHaveBeenCalled();
  });

  it('bounds the count and the total program of a policy\'s patterns, before any is compiled', () => {
    const near = (c: string) => `${c}{${MAX_PATTERN_PROGRAM - 2}}`;
    expect(guardrailRulesSchema.safeParse([regex([near('a')]), regex([near('b')])]).success).toBe(true);
    const compile = re2Compile();
    const total = guardrailRulesSchema.safeParse([regex([near('a')]), regex([near('b'), near('c')])]);
    expect(total.error?.issues).toEqual([expect.objectContaining({ path: [1, 'patterns', 1], message: expect.stringContaining(`together; at most ${MAX_SET_PROGRAM}`) })]);
    // 50 rules of 20 patterns (what the per-rule limits allow): the 101st is refused.
    const crowded = Array.from({ length: 50 }, (_, r) => regex(Array.from({ length: 20 }, (_, p) => `r${r}p${p}`)));
    const count = guardrailRulesSchema.safeParse(crowded);
    expect(count.error?.issues).toEqual([expect.objectContaining({ path: [5, 'patterns', 0], message: expect.stringContaining('one too many') })]);
    expect(compile).not.toHaveBeenCalled();
  });

  it('a policy stored before the bounds compiles none of its patterns: its regex rules fail as engine errors', async () => {
    const policy = (rules: Array<Record<string, unknown>>): GuardrailPolicy => ({ enabled: true, on_engine_error: 'block', rules: rules as GuardrailPolicy['rules'] });
    const near = (c: string) => `${c}{${MAX_PATTERN_PROGRAM - 2}}`;
    const compile = re2Compile();
    for (const stored of [policy([regex([HUGE_RULE])]), policy([regex([near('a')]), regex([near('b')]), regex([near('c')])])]) {
      const rules = mergePolicies([compilePolicy(stored, BUILTIN_DETECTORS)])!;
      expect((await scan(rules.input, ['hello'], 'input')).unavailable).toBe('regex');
    }
    expect(compile).not.toHaveBeenCalled();
  });

  it('cuts off a scan past its deadline: within the bounds, finding every match can still be quadratic in the text', async () => {
    // 997 instructions; each of its matches (one letter) is found only after the first
    // alternative has read to the end of the text: 5 s for 1,000 letters, 36 s for 2,000.
    const farAhead = '\\pL+\\pL{990}\\d|\\pL';
    const rules = [regex([farAhead])];
    expect(guardrailRulesSchema.safeParse(rules).success).toBe(true);
    const letters = Array.from({ length: 1_000 }, (_, i) => 'abcdefghijklmnopqrstuvwxyzéαβγδε'[i % 32]).join('');
    for (const onEngineError of ['block', 'allow'] as const) {
      const stored: GuardrailPolicy = { enabled: true, on_engine_error: onEngineError, rules: rules as GuardrailPolicy['rules'] };
      const result = await scan(mergePolicies([compilePolicy(stored, BUILTIN_DETECTORS)])!.input, [letters], 'input');
      expect(onEngineError === 'block' ? result.unavailable : result.skipped).toEqual(onEngineError === 'block' ? 'regex' : ['regex']);
    }
    // A text whose matches end their searches early is scanned whole.
    const shortMatches = await scan(mergePolicies([compilePolicy({ enabled: true, on_engine_error: 'block', rules: [regex(['\\d{3}'])] as GuardrailPolicy['rules'] }, BUILTIN_DETECTORS)])!.input, ['123 456 '.repeat(5_000)], 'input');
    expect(shortMatches.findings).toEqual([{ detector: 'regex', stage: 'input', action: 'block', count: 10_000 }]);
  });
});
