import type { RE2JS } from 're2js';
import { programSizeBound } from './program-size';

/**
 * A regular expression a tenant wrote (a guardrail `regex` rule, a `pattern` or
 * `patternProperties` key of a decision policy's schema or of a tool server's schema), run with
 * RE2 semantics: linear time, so no input makes it backtrack. Linear in the input, but RE2's
 * cost is also its program's size: each input character may step every instruction, and
 * compiling takes time and heap in proportion. Nothing bounded the program (issue 52): a
 * 5.5 KB pattern compiled for seconds into a program of a million instructions, and a
 * 496-character guardrail rule took 26 s to scan a 2,000-character prompt. So each pattern's
 * length and program are bounded, and so are the count and the total program of the patterns
 * one schema or one policy holds; all of it is checked before anything is compiled, with the
 * program counted from the source (program-size.ts), and what is refused is never compiled.
 * The bounds and their cost are measured in bench/results/2026-11-29-issue-52-pattern-bounds.md.
 */

/** At most this many characters in one pattern. */
export const MAX_PATTERN_CHARS = 1_000;
/**
 * At most this many RE2 instructions in one pattern's program: about 30 µs of the event loop
 * per input character at worst. Common validation patterns are far below it (a UUID is 40, an
 * email address 260, the long IPv6 pattern 967); `{n}` counts n copies of what it repeats.
 */
export const MAX_PATTERN_PROGRAM = 1_000;
/** At most this many patterns in one schema or one guardrail policy. */
export const MAX_PATTERNS_PER_SET = 100;
/**
 * At most this many instructions in all the patterns of one schema or one guardrail policy
 * together: what one input character may cost when every pattern reads it, about 60 µs.
 */
export const MAX_SET_PROGRAM = 2_000;

/** What is wrong with one pattern of `program` instructions (programSizeBound), or null. */
function sizeProblem(source: string, program: number): string | null {
  if (source.length > MAX_PATTERN_CHARS) return `is ${source.length} characters long; at most ${MAX_PATTERN_CHARS}`;
  if (program > MAX_PATTERN_PROGRAM) {
    return `compiles to about ${program} RE2 instructions; at most ${MAX_PATTERN_PROGRAM} (a counted repetition such as \`{100}\` copies what it repeats)`;
  }
  return null;
}

/** What is wrong with one pattern's size, or null; cheap (no compiling). */
export function patternTooLarge(source: string): string | null {
  // The length first: the count reads the whole source.
  return source.length > MAX_PATTERN_CHARS ? sizeProblem(source, 0) : sizeProblem(source, programSizeBound(source));
}

/** A pattern and where it sits (a field path or a JSON pointer), as a refusal names it. */
export type PlacedPattern = { source: string; where: string };

/**
 * What is wrong with the patterns of one schema or policy together (their count, each one's
 * size, their total program), with the first pattern at fault, or null; cheap (no compiling).
 * A pattern written twice is compiled once, and counts once.
 */
export function patternSetTooLarge<P extends PlacedPattern>(patterns: readonly P[]): { pattern: P; reason: string } | null {
  const seen = new Set<string>();
  let total = 0;
  for (const pattern of patterns) {
    if (seen.has(pattern.source)) continue;
    seen.add(pattern.source);
    if (seen.size > MAX_PATTERNS_PER_SET) return { pattern, reason: `is one too many: at most ${MAX_PATTERNS_PER_SET} distinct patterns in one schema or policy` };
    const program = pattern.source.length > MAX_PATTERN_CHARS ? 0 : programSizeBound(pattern.source);
    const tooLarge = sizeProblem(pattern.source, program);
    if (tooLarge) return { pattern, reason: tooLarge };
    total += program;
    if (total > MAX_SET_PROGRAM) {
      return { pattern, reason: `brings the patterns to about ${total} RE2 instructions together; at most ${MAX_SET_PROGRAM} in one schema or policy` };
    }
  }
  return null;
}

/**
 * Compiles one pattern within the per-pattern bounds, or throws saying why (a pattern past them
 * is not compiled). `re2js` (about 0.5 MB of heap) is loaded by the first pattern, not at start:
 * a `require`, as core/guardrails/policy-cache.ts explains.
 */
export function compileUserPattern(source: string, caseInsensitive = false): RE2JS {
  const tooLarge = patternTooLarge(source);
  if (tooLarge) throw new Error(`the pattern ${tooLarge}`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, see above
  const { RE2JS: re2 } = require('re2js') as typeof import('re2js');
  const compiled = re2.compile(source, caseInsensitive ? re2.CASE_INSENSITIVE : 0);
  // The count above never undercounts (program-size.ts); should re2js ever compile more, the bound still holds.
  if (compiled.programSize() > MAX_PATTERN_PROGRAM) throw new Error(`the pattern compiles to ${compiled.programSize()} RE2 instructions; at most ${MAX_PATTERN_PROGRAM}`);
  return compiled;
}

/** What ajv asks of a pattern: whether a text has a match. */
export type PatternTest = { test(text: string): boolean; toString(): string };

/**
 * What a schema pattern's search may cost, counted as its program's size times the text's
 * length: what RE2 reads at worst (each character may step every instruction, about 33 ns each
 * here, bench/results/2026-11-29-issue-52-pattern-bounds.md). Counted rather than timed, so a
 * value passes or fails the same on a busy machine as on an idle one. One search at most
 * PATTERN_SEARCH_WORK_MAX (about 100 ms: a pattern at the bound reads strings up to 3,000
 * characters, a UUID's 40 instructions 75,000); one validation at most PATTERN_CHECK_WORK_MAX
 * (about 200 ms: 4,000 UUID-shaped strings), so that many strings cannot add up to a stall.
 */
export const PATTERN_SEARCH_WORK_MAX = 3_000_000;
export const PATTERN_CHECK_WORK_MAX = 6_000_000;

/**
 * A value whose patterns would cost more than the budget to check. It is thrown out of ajv's
 * `validate` (which lets a pattern engine's exception through) and the caller treats the value
 * as not valid: a search not made must not count as "no match", which under `not`,
 * `patternProperties` or `if` would let the value through.
 */
export class PatternBudgetExceeded extends Error {}

/** The work the validation under way may still spend (withinPatternBudget), or null outside one. */
let workLeft: number | null = null;

/**
 * Runs one synchronous validation with its budget of pattern work. Outside one, each search is
 * still bounded by PATTERN_SEARCH_WORK_MAX.
 */
export function withinPatternBudget<T>(check: () => T): T {
  const outer = workLeft;
  workLeft = PATTERN_CHECK_WORK_MAX;
  try {
    return check();
  } finally {
    workLeft = outer;
  }
}

/**
 * A pattern's `test`, searched without re2js's lazy DFA. `RE2JS.test` builds a DFA state by
 * state as it reads, kept with the pattern up to 8 MB each: an answer crafted to visit many
 * states (`(?:a|b)*a(?:a|b){14}$` on a long run of `a` and `b`) leaves megabytes behind in
 * every cached validator. A `find` runs the NFA (or one-pass or bit-state matcher), whose
 * memory is its program's size: slower by microseconds on a short string, never heavier. A
 * search past the budget is not made: PatternBudgetExceeded.
 */
function searchOnly(pattern: RE2JS): PatternTest {
  const program = pattern.programSize();
  return {
    test: (text) => {
      const work = program * text.length;
      if (work > PATTERN_SEARCH_WORK_MAX) throw new PatternBudgetExceeded(`a string of ${text.length} characters is too long to check against the pattern \`${pattern.pattern()}\``);
      if (workLeft !== null) {
        workLeft -= work;
        if (workLeft < 0) throw new PatternBudgetExceeded(`the value's strings are too many or too long to check against the schema's patterns`);
      }
      return pattern.matcher(text).find();
    },
    toString: () => pattern.pattern(),
  };
}

/**
 * The patterns one schema compiles, as they are compiled: each distinct pattern once (ajv asks
 * again for a pattern `additionalProperties` also reads), and a guard for a pattern the
 * caller's check did not see, so no schema compiles past the bounds however it was reached.
 */
export function patternCompiler(): (source: string) => PatternTest {
  const compiled = new Map<string, PatternTest>();
  let total = 0;
  return (source) => {
    const known = compiled.get(source);
    if (known) return known;
    if (compiled.size >= MAX_PATTERNS_PER_SET) throw new Error(`more than ${MAX_PATTERNS_PER_SET} patterns in one schema`);
    const program = programSizeBound(source);
    if (total + program > MAX_SET_PROGRAM) throw new Error(`the patterns compile to more than ${MAX_SET_PROGRAM} RE2 instructions together`);
    const pattern = searchOnly(compileUserPattern(source));
    compiled.set(source, pattern);
    total += program;
    return pattern;
  };
}
