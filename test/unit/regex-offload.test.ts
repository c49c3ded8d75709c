import type { GuardrailPolicy } from '../../core/db/schema';
import { BUILTIN_DETECTORS } from '../../core/guardrails/detectors';
import { compilePolicy, mergePolicies, scan } from '../../core/guardrails/engine';
import { OFFLOAD_WAITING_PER_TENANT, OffloadError, RegexOffload, regexOffload } from '../../core/guardrails/regex-offload';

/**
 * Issue 52: patterns within the bounds still cost up to about 33 ns a character for each
 * instruction of their programs, and a search cannot be interrupted. A guardrail policy at the
 * bounds over a long prompt would hold the event loop every tenant shares for seconds (a minute
 * at the 1,000,000-character cap); a decision answer or tool arguments with many long strings
 * the same. Guardrail scans too large for the loop run on a thread, cut at their deadline
 * (schema patterns are searched within a budget of the loop's time: decision-schema-safety.test.ts).
 */

/** 1,000 instructions each, every one busy on a run of letters (none ever matches). */
const WORST = ['\\pL+\\pL{995}\\d', '.+\\pL{995}\\s'];
const letters = (n: number) => Array.from({ length: n }, (_, i) => 'abcdefghijklmnopqrstuvwxyzéαβγδε'[i % 32]).join('');
const regexPolicy = (patterns: string[], onEngineError: 'block' | 'allow' = 'block'): GuardrailPolicy => ({
  enabled: true, on_engine_error: onEngineError, rules: [{ detector: 'regex', stage: 'input', action: 'block', patterns } as GuardrailPolicy['rules'][number]],
});

/** Counts the event loop's turns while `work` runs: none when it holds the loop throughout. */
async function loopTurnsDuring<T>(work: () => Promise<T>): Promise<{ value: T; turns: number }> {
  let turns = 0;
  const ticker = setInterval(() => turns++, 1);
  try {
    const value = await work();
    return { value, turns };
  } finally {
    clearInterval(ticker);
  }
}

describe('a guardrail regex scan too large for the event loop', () => {
  afterAll(() => regexOffload().close());

  it('runs off the loop: the loop keeps turning while a policy at the bounds reads a long prompt, and the findings are the same', async () => {
    const rules = mergePolicies([compilePolicy(regexPolicy([WORST[0]!, 'needle\\d+']), BUILTIN_DETECTORS)])!;
    expect(rules.input[0]!.detect.regex?.program).toBeGreaterThan(1_000);
    // 1,000 instructions over 40,000 characters: about a second of RE2 at worst, on the loop before.
    const prompt = `${letters(20_000)} needle42 ${letters(20_000)}`;
    const { value: result, turns } = await loopTurnsDuring(() => scan(rules.input, [prompt], 'input', 'org_a'));
    expect(turns).toBeGreaterThan(0);
    expect(result).toMatchObject({ unavailable: null, skipped: [], findings: [{ detector: 'regex', stage: 'input', action: 'block', count: 1 }] });
    expect(result.spans[0]).toEqual([expect.objectContaining({ start: 20_001, end: 20_009 })]);
  });

  it('keeps ordinary scans on the loop, with the same findings', async () => {
    const rules = mergePolicies([compilePolicy(regexPolicy(['ORD-\\d{6}']), BUILTIN_DETECTORS)])!;
    // Once first: a program's first search compiles and optimizes code, which on a busy machine
    // (CI's two cores under the whole suite) can pass INLINE_REGEX_MS and send that one scan to
    // the thread. What is measured is an ordinary scan, not the first one.
    await scan(rules.input, ['order ORD-000000'], 'input', 'org_a');
    const { value: result, turns } = await loopTurnsDuring(() => scan(rules.input, ['order ORD-123456 and ORD-654321'], 'input', 'org_a'));
    expect(turns).toBe(0);
    expect(result.findings).toEqual([{ detector: 'regex', stage: 'input', action: 'block', count: 2 }]);
  });
});

describe('the offload thread', () => {
  let offload: RegexOffload;
  beforeEach(() => (offload = new RegexOffload()));
  afterEach(() => offload.close());

  const heavy = [{ source: WORST[0]!, caseInsensitive: false }];
  const light = [{ source: 'x\\d', caseInsensitive: false }];

  it('ends a scan past its deadline (the thread is stopped mid-search), and the next scan runs on a new thread', async () => {
    await expect(offload.scan('org_a', heavy, [letters(200_000)], 100)).rejects.toThrow(OffloadError);
    await expect(offload.scan('org_a', light, ['ax1 x2'], 5_000)).resolves.toEqual([[1, 3, 4, 6]]);
  });

  it('takes tenants in turn, so one organization\'s long scans do not keep another\'s waiting behind all of them', async () => {
    const order: string[] = [];
    const run = (tenant: string, label: string, text: string) => offload.scan(tenant, light, [text], 10_000).then(() => order.push(label));
    const slow = `${letters(100_000)}x1`;
    await Promise.all([run('org_a', 'a1', slow), run('org_a', 'a2', slow), run('org_a', 'a3', slow), run('org_b', 'b1', 'x1')]);
    expect(order).toEqual(['a1', 'b1', 'a2', 'a3']);
  });

  it('refuses at once a tenant\'s scan past its most waiting, without touching others\'', async () => {
    const waiting = Array.from({ length: OFFLOAD_WAITING_PER_TENANT }, () => offload.scan('org_a', light, ['x1'], 10_000));
    await expect(offload.scan('org_a', light, ['x1'], 10_000)).rejects.toThrow(/already has/);
    await expect(offload.scan('org_b', light, ['x1'], 10_000)).resolves.toEqual([[0, 2]]);
    await Promise.all(waiting);
  });
});
