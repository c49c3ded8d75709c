/**
 * Issue 52: what a tenant's regular expression costs the API's event loop, before and after the
 * bounds on patterns (core/patterns/user-pattern.ts). Each case runs in a child process of its
 * own (`node --expose-gc`), so one case's heap is not another's:
 *
 * - before: the review's three cases compiled as the gateway compiled them until this change
 *   (re2js with no bound; ajv as createSafeAjv set it up): compile time, heap the compiled
 *   pattern keeps, and time per input character;
 * - refused: the same three cases as the gateway now answers them (the write is refused, nothing
 *   is compiled);
 * - accepted: the worst the bounds accept: one pattern at the program bound, one schema and one
 *   guardrail policy at the total bound, and three policies at it merged (organization, project
 *   and key), on the input that keeps every instruction busy.
 *
 * Time per input character is CPU time of this process (`process.cpuUsage`) over the input's
 * length; heap is V8's heap plus array buffers after a full GC, with the compiled pattern held;
 * peak RSS is the child process's highest resident set (the case's peak, plus about 100 MB of
 * Node, tsx and the modules loaded).
 *
 *   npx tsx bench/pattern-bounds.ts            (the table, in markdown)
 *   npx tsx bench/pattern-bounds.ts <case>     (one case, as JSON; what the table runs)
 */
import { execFileSync } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import Ajv from 'ajv';
import { RE2JS } from 're2js';
import { compileOutputSchema, schemaViolation } from '../core/decisions/output-schema';
import { BUILTIN_DETECTORS } from '../core/guardrails/detectors';
import { compilePolicy, mergePolicies, scan } from '../core/guardrails/engine';
import { regexOffload } from '../core/guardrails/regex-offload';
import { guardrailRulesSchema } from '../core/guardrails/rules';
import type { GuardrailPolicy } from '../core/db/schema';

type Row = { compileMs: number | null; heapMb: number | null; perCharUs: number | null; blockMs?: number | null; note: string; peakRssMb?: number };

/** The review's 5.5 KB pattern: 611 times `.{0,1000}`, then a digit the input never has. */
const REVIEW_PATTERN = `${'.{0,1000}'.repeat(610)}\\d`;
/** The review's 1,900 `patternProperties` (about 54 KB of schema). */
const REVIEW_PATTERN_PROPERTIES = Object.fromEntries(Array.from({ length: 1_900 }, (_, i) => [`^f${i}x$`, { type: 'string' }]));
/** The review's 496-character guardrail rule: about 98,000 RE2 instructions. */
const REVIEW_RULE = `${'\\w{0,1000}'.repeat(49)}\\s\\d\\s`;
/**
 * The worst patterns the bounds accept: 1,000 instructions each (the bound), every one of which
 * stays busy on a long run of letters (a thread per start position, none ever matching).
 */
const WORST = ['\\pL+\\pL{995}\\d', '.+\\pL{995}\\s', '\\PN+\\PN{995}\\d', '[\\pL\\pM]+[\\pL\\pM]{995}\\d', '(?i)\\pL+\\pL{995}\\s', '\\pL+\\pL{995}!'];
/** Letters, mixed scripts: no digit, space or `!`, so nothing matches and no thread ends early. */
const letters = (n: number) => Array.from({ length: n }, (_, i) => 'abcdefghijklmnopqrstuvwxyzéαβγδε'[i % 32]).join('');
/** ASCII letters only: what `\w` reads. */
const asciiLetters = (n: number) => Array.from({ length: n }, (_, i) => 'abcdefghijklmnopqrstuvwxyz'[i % 26]).join('');
/**
 * Within the bounds (997 instructions), and each of its matches (one letter) found only after
 * its first alternative has read to the end of the text: finding them all is quadratic.
 */
const FAR_AHEAD = '\\pL+\\pL{990}\\d|\\pL';
/** 51 instructions, whose DFA has a state for each of the last 15 letters' 2^15 choices. */
const MANY_STATES = '(?:a|b)*a(?:a|b){14}$';
/** 200,000 random `a` and `b`: an answer that visits thousands of those states. */
function randomAb(n: number): string {
  let seed = 7;
  return Array.from({ length: n }, () => ((seed = (seed * 1103515245 + 12345) % 2147483648) < 1 << 30 ? 'a' : 'b')).join('');
}
/** Within the bounds (805 instructions): each match found after reading 400 letters ahead with 400 threads. */
const WIDE_AHEAD = '(?:\\pL?){400}\\d|\\pL';

const gc = () => (globalThis as { gc?: () => void }).gc!();
function heapNow(): number {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}
function cpuMs(work: () => unknown): number {
  const start = process.cpuUsage();
  work();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}
/** Compile time and heap kept of `make`, whose result is held until the case ends. */
function compiled<T>(make: () => T): { value: T; compileMs: number; heapMb: number } {
  const before = heapNow();
  let value: T | undefined;
  const compileMs = cpuMs(() => (value = make()));
  return { value: value!, compileMs, heapMb: (heapNow() - before) / 1e6 };
}

/** ajv as createSafeAjv set it up before the bounds: re2js with no limit on what it compiles. */
function unboundedAjv(): Ajv {
  return new Ajv({ strict: false, allErrors: false, logger: false, inlineRefs: false, code: { regExp: Object.assign((p: string) => RE2JS.compile(p), { code: 'linearRegExp' }) } });
}

/** The guardrail scan of one prompt by these policies, as the chat path runs it (on the offload thread when it is large). */
function guardrailScan(policies: string[][]): (text: string) => Promise<unknown> {
  const policy = (patterns: string[]): GuardrailPolicy => ({ enabled: true, on_engine_error: 'block', rules: [{ detector: 'regex', stage: 'input', action: 'block', patterns } as GuardrailPolicy['rules'][number]] });
  const active = mergePolicies(policies.map((p) => compilePolicy(policy(p), BUILTIN_DETECTORS)))!;
  return async (text) => {
    const result = await scan(active.input, [text], 'input', 'bench');
    if (result.unavailable || result.skipped.length > 0) throw new Error('cut off at its deadline (an engine error)');
    return result;
  };
}

/** Time per character of `run` over a prompt of `n` letters, after one short warm-up. */
function perCharUs(run: (text: string) => unknown, n: number, make = letters): number {
  run(make(50));
  const text = make(n);
  return (cpuMs(() => run(text)) * 1000) / n;
}

/**
 * CPU of the whole process (the offload thread's included) per character of an awaited scan,
 * and the longest the event loop was held meanwhile (the loop's delay, sampled every ms).
 */
async function scanCost(run: (text: string) => Promise<unknown>, n: number, make = letters): Promise<{ perCharUs: number; blockMs: number; wallMs: number; ended: string }> {
  await run(make(50)).catch(() => undefined);
  const text = make(n);
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const started = performance.now();
  const cpu = process.cpuUsage();
  let ended = 'scanned whole';
  await run(text).catch((err: Error) => (ended = err.message));
  const used = process.cpuUsage(cpu);
  const wallMs = performance.now() - started;
  // The loop's delay is sampled on its next turns.
  await new Promise((r) => setTimeout(r, 20));
  loop.disable();
  return { perCharUs: (used.user + used.system) / n, blockMs: loop.max / 1e6, wallMs, ended };
}

/** A guardrail scan that a deadline may cut: its time per character, how it ended, and the event loop's longest hold. */
async function cutScan(patterns: string[], n: number): Promise<{ perCharUs: number; blockMs: number; ended: string }> {
  const policy: GuardrailPolicy = { enabled: true, on_engine_error: 'block', rules: [{ detector: 'regex', stage: 'input', action: 'block', patterns } as GuardrailPolicy['rules'][number]] };
  const active = mergePolicies([compilePolicy(policy, BUILTIN_DETECTORS)])!;
  const cost = await scanCost(async (text) => {
    const result = await scan(active.input, [text], 'input', 'bench');
    if (result.unavailable) throw new Error('cut');
  }, n);
  return { ...cost, ended: cost.ended === 'cut' ? `cut off at the deadline after ${cost.wallMs.toFixed(0)} ms (an engine error: \`on_engine_error\` decides)` : `scanned whole in ${cost.wallMs.toFixed(0)} ms` };
}

/** Every match of one pattern, as the regex detector found them before the deadline. */
function findAll(pattern: RE2JS): (text: string) => void {
  return (text) => {
    const m = pattern.matcher(text);
    while (m.find());
  };
}

const refusalUs = (refuse: () => boolean) => {
  if (!refuse()) throw new Error('accepted');
  return cpuMs(() => refuse()) * 1000;
};

const CASES: Record<string, () => Row | Promise<Row>> = {
  'before: the review\'s 5.5 KB pattern, in a decision schema': () => {
    const c = compiled(() => unboundedAjv().compile({ type: 'object', properties: { code: { type: 'string', pattern: REVIEW_PATTERN } } }));
    return { compileMs: c.compileMs, heapMb: c.heapMb, perCharUs: perCharUs((text) => c.value({ code: text }), 50), note: `${REVIEW_PATTERN.length} characters, ${RE2JS.compile(REVIEW_PATTERN).programSize()} instructions; an answer of 50 letters` };
  },
  'before: the review\'s 1,900 patternProperties, in a decision schema': () => {
    const schema = { type: 'object', patternProperties: REVIEW_PATTERN_PROPERTIES };
    // ajv renders the 1,900 patterns' code as one nested chain: it may overflow the stack
    // before it is done (it depends on how far the JIT got), which the row says.
    let overflow = '';
    const c = compiled(() => {
      try {
        return unboundedAjv().compile(schema);
      } catch (err) {
        overflow = `; compiling it ended in ${(err as Error).name}: ${(err as Error).message}`;
        return null;
      }
    });
    // An answer of ten keys of 100 characters, each tried against every pattern.
    const answer = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`${i}${letters(99)}`, 'x']));
    const validate = c.value;
    let us: number | null = null;
    try {
      if (validate) {
        validate(answer);
        us = (cpuMs(() => validate(answer)) * 1000) / 1000;
      }
    } catch (err) {
      overflow = `; validating an answer ended in ${(err as Error).name}: ${(err as Error).message}`;
    }
    return { compileMs: c.compileMs, heapMb: c.heapMb, perCharUs: us, note: `${JSON.stringify(schema).length} bytes of schema; per character of an answer's keys (10 keys of 100)${overflow}` };
  },
  'before: the review\'s 496-character guardrail rule': () => {
    const c = compiled(() => RE2JS.compile(REVIEW_RULE, RE2JS.CASE_INSENSITIVE));
    return { compileMs: c.compileMs, heapMb: c.heapMb, perCharUs: perCharUs(findAll(c.value), 2_000, asciiLetters), note: `${c.value.programSize()} instructions; a 2,000-character prompt of ASCII letters, as the regex detector scans it` };
  },
  'before: a pattern within the bounds whose every match looks to the end of the text': () => {
    const c = compiled(() => RE2JS.compile(FAR_AHEAD));
    return { compileMs: c.compileMs, heapMb: c.heapMb, perCharUs: perCharUs(findAll(c.value), 1_000), note: `\`${FAR_AHEAD}\`, ${c.value.programSize()} instructions; 1,000 letters, every match found, no deadline (quadratic: 2,000 letters took 36 s)` };
  },
  'before: a pattern within the bounds whose every match looks 400 letters ahead': () => {
    const c = compiled(() => RE2JS.compile(WIDE_AHEAD));
    return { compileMs: c.compileMs, heapMb: c.heapMb, perCharUs: perCharUs(findAll(c.value), 2_000), note: `\`${WIDE_AHEAD}\`, ${c.value.programSize()} instructions; 2,000 letters, every match found, no deadline` };
  },
  'before: a small pattern whose DFA a crafted answer makes grow, in a decision schema': () => {
    const c = compiled(() => unboundedAjv().compile({ type: 'object', properties: { ab: { type: 'string', pattern: MANY_STATES } } }));
    const answer = { ab: randomAb(200_000) };
    const before = heapNow();
    const us = (cpuMs(() => c.value(answer)) * 1000) / 200_000;
    return { compileMs: c.compileMs, heapMb: c.heapMb + (heapNow() - before) / 1e6, perCharUs: us, note: `\`${MANY_STATES}\`; one answer of 200,000 \`a\` and \`b\`: heap includes ${((heapNow() - before) / 1e6).toFixed(1)} MB of DFA states kept with the validator` };
  },
  'refused: the review\'s 5.5 KB pattern': () => ({ compileMs: null, heapMb: null, perCharUs: null, note: `refused in ${refusalUs(() => !compileOutputSchema({ type: 'object', properties: { code: { type: 'string', pattern: REVIEW_PATTERN } } }).ok).toFixed(0)} µs, nothing compiled` }),
  'refused: the review\'s 1,900 patternProperties': () => ({ compileMs: null, heapMb: null, perCharUs: null, note: `refused in ${refusalUs(() => !compileOutputSchema({ type: 'object', patternProperties: REVIEW_PATTERN_PROPERTIES }).ok).toFixed(0)} µs, nothing compiled` }),
  'refused: the review\'s 496-character guardrail rule': () => ({ compileMs: null, heapMb: null, perCharUs: null, note: `refused in ${refusalUs(() => !guardrailRulesSchema.safeParse([{ detector: 'regex', stage: 'input', action: 'block', case_insensitive: true, patterns: [REVIEW_RULE] }]).success).toFixed(0)} µs, nothing compiled` }),
  'accepted: one pattern at the bound (1,000 instructions), guardrail scan': async () => {
    const c = compiled(() => guardrailScan([[WORST[0]!]]));
    const cost = await scanCost(c.value, 2_000);
    return { compileMs: c.compileMs, heapMb: c.heapMb, perCharUs: cost.perCharUs, blockMs: cost.blockMs, note: `\`${WORST[0]}\`; a 2,000-character prompt, on the offload thread; ${cost.ended} in ${cost.wallMs.toFixed(0)} ms` };
  },
  'accepted: one policy at the total bound (2,000 instructions), guardrail scan, 2,000 characters': async () => {
    const c = compiled(() => guardrailScan([WORST.slice(0, 2)]));
    const cost = await scanCost(c.value, 2_000);
    return { compileMs: c.compileMs, heapMb: c.heapMb, perCharUs: cost.perCharUs, blockMs: cost.blockMs, note: `two patterns of 1,000 instructions, on the offload thread; ${cost.ended} in ${cost.wallMs.toFixed(0)} ms` };
  },
  'accepted: one policy at the total bound, guardrail scan, 60,000 characters': async () => {
    const c = compiled(() => guardrailScan([WORST.slice(0, 2)]));
    const cost = await scanCost(c.value, 60_000);
    return { compileMs: c.compileMs, heapMb: c.heapMb, perCharUs: cost.perCharUs, blockMs: cost.blockMs, note: `two patterns of 1,000 instructions, on the offload thread; ${cost.ended} in ${cost.wallMs.toFixed(0)} ms` };
  },
  'accepted: one policy at the total bound, guardrail scan, 1,000,000 characters': async () => {
    const c = compiled(() => guardrailScan([WORST.slice(0, 2)]));
    const cost = await scanCost(c.value, 1_000_000);
    return { compileMs: c.compileMs, heapMb: c.heapMb, perCharUs: cost.perCharUs, blockMs: cost.blockMs, note: `two patterns of 1,000 instructions, on the offload thread: ${cost.ended} after ${cost.wallMs.toFixed(0)} ms (the 5 s cap; \`on_engine_error\` decides)` };
  },
  'accepted: three policies at the bound merged (organization, project, key), 2,000 characters': async () => {
    const c = compiled(() => guardrailScan([WORST.slice(0, 2), WORST.slice(2, 4), WORST.slice(4, 6)]));
    const cost = await scanCost(c.value, 2_000);
    return { compileMs: c.compileMs, heapMb: c.heapMb, perCharUs: cost.perCharUs, blockMs: cost.blockMs, note: `six patterns of 1,000 instructions, on the offload thread; ${cost.ended} in ${cost.wallMs.toFixed(0)} ms` };
  },
  'accepted: the pattern whose every match looks to the end of the text, guardrail scan, 2,000 characters': async () => {
    const { perCharUs: us, blockMs, ended } = await cutScan([FAR_AHEAD], 2_000);
    return { compileMs: null, heapMb: null, perCharUs: us, blockMs, note: ended };
  },
  'accepted: the pattern whose every match looks 400 letters ahead, guardrail scan, 2,000 characters': async () => {
    const { perCharUs: us, blockMs, ended } = await cutScan([WIDE_AHEAD], 2_000);
    return { compileMs: null, heapMb: null, perCharUs: us, blockMs, note: ended };
  },
  'accepted: a small pattern whose every match reads to the end (`a*b|a`), guardrail scan, 100,000 characters': async () => {
    const { perCharUs: us, blockMs, ended } = await cutScan(['a*b|a'], 100_000);
    return { compileMs: null, heapMb: null, perCharUs: us, blockMs, note: `${ended}; a run of \`a\`: tried inline for 5 ms, then on the offload thread` };
  },
  'accepted: one decision schema at the total bound, an answer of one 200,000-character string': () => {
    const schema = { type: 'object', properties: { code: { type: 'string', allOf: [{ pattern: WORST[0] }, { pattern: WORST[1] }] } } };
    const out = compileOutputSchema(schema);
    if (!out.ok) throw new Error(out.reason);
    const text = letters(200_000);
    let verdict: string | null = null;
    const ms = cpuMs(() => (verdict = schemaViolation(out.validate, { code: text })));
    return { compileMs: null, heapMb: null, perCharUs: (ms * 1000) / 200_000, blockMs: ms, note: `not searched: its worst case is past PATTERN_SEARCH_WORK_MAX, so the string fails the pattern (${verdict})` };
  },
  'accepted: one decision schema with a pattern at the bound, an answer of 1,000 matching strings of 2,000 characters': () => {
    // Strings that match (letters, then a digit), so that every one is searched until the budget.
    const schema = { type: 'object', properties: { codes: { type: 'array', items: { type: 'string', pattern: WORST[0] } } } };
    const out = compileOutputSchema(schema);
    if (!out.ok) throw new Error(out.reason);
    const answer = { codes: Array.from({ length: 1_000 }, () => `${letters(1_999)}1`) };
    let verdict: string | null = null;
    const ms = cpuMs(() => (verdict = schemaViolation(out.validate, answer)));
    return { compileMs: null, heapMb: null, perCharUs: (ms * 1000) / 2_000_000, blockMs: ms, note: `searched until the turn's PATTERN_TURN_BUDGET_MS, then the strings fail the pattern (${verdict})` };
  },
  'ordinary: three common patterns, guardrail scan, 1,000,000 characters of prose': async () => {
    const prose = (n: number) => 'Please review order ACME-104233 for jane.doe@example.com before Friday; the key is in the vault. '.repeat(Math.ceil(n / 96)).slice(0, n);
    const c = compiled(() => guardrailScan([['\\bACME-[0-9]{6}\\b', '(?i)\\b(?:secret|password|token)\\s*[:=]\\s*\\S+', '\\b(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14})\\b']]));
    const cost = await scanCost(c.value, 1_000_000, prose);
    return { compileMs: c.compileMs, heapMb: c.heapMb, perCharUs: cost.perCharUs, blockMs: cost.blockMs, note: `on the offload thread; ${cost.ended} in ${cost.wallMs.toFixed(0)} ms` };
  },
  'accepted: the small pattern whose DFA an answer made grow, in a decision schema': () => {
    const c = compiled(() => {
      const out = compileOutputSchema({ type: 'object', properties: { ab: { type: 'string', pattern: MANY_STATES } } });
      if (!out.ok) throw new Error(out.reason);
      return out.validate;
    });
    // 50,000 letters: within PATTERN_SEARCH_WORK_MAX for its 51 instructions, so it is searched.
    const answer = { ab: randomAb(50_000) };
    const before = heapNow();
    const us = (cpuMs(() => c.value(answer)) * 1000) / 50_000;
    return { compileMs: c.compileMs, heapMb: c.heapMb + (heapNow() - before) / 1e6, perCharUs: us, note: `\`${MANY_STATES}\`; an answer of 50,000 \`a\` and \`b\`, searched without the DFA: heap includes ${((heapNow() - before) / 1e6).toFixed(1)} MB after reading it` };
  },
  'accepted: one decision schema at the total bound, one answer string': () => {
    const schema = { type: 'object', properties: { code: { type: 'string', allOf: [{ pattern: WORST[0] }, { pattern: WORST[1] }] } } };
    const c = compiled(() => {
      const out = compileOutputSchema(schema);
      if (!out.ok) throw new Error(out.reason);
      return out.validate;
    });
    const before = heapNow();
    const us = perCharUs((text) => schemaViolation(c.value, { code: text }), 2_000);
    const readMb = (heapNow() - before) / 1e6;
    return { compileMs: c.compileMs, heapMb: c.heapMb + readMb, perCharUs: us, note: `two patterns of 1,000 instructions on one string of 2,000 letters; heap includes ${readMb.toFixed(1)} MB after reading it` };
  },
};

async function runOne(name: string): Promise<void> {
  const fn = CASES[name];
  if (!fn) throw new Error(`no case ${name}`);
  const row = await fn();
  await regexOffload().close();
  process.stdout.write(JSON.stringify({ ...row, peakRssMb: process.resourceUsage().maxRSS / 1024 }));
}

function runAll(): void {
  console.log('| case | compile ms | heap kept MB | peak RSS MB | µs per input character | event loop held, ms | what |');
  console.log('|---|---:|---:|---:|---:|---:|---|');
  const fmt = (n: number | null, digits: number) => (n === null ? '–' : n.toFixed(digits));
  for (const name of Object.keys(CASES)) {
    const out = execFileSync(process.execPath, ['--expose-gc', '--import', 'tsx', __filename, name], { encoding: 'utf8', maxBuffer: 1 << 20 });
    const row = JSON.parse(out) as Row;
    console.log(`| ${name} | ${fmt(row.compileMs, 1)} | ${fmt(row.heapMb, 1)} | ${fmt(row.peakRssMb ?? null, 0)} | ${fmt(row.perCharUs, 2)} | ${fmt(row.blockMs ?? null, 1)} | ${row.note} |`);
  }
}

if (process.argv[2]) void runOne(process.argv[2]);
else runAll();
