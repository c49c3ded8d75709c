import { z } from 'zod';
import { ENGINE_ERROR_ACTIONS, GUARDRAIL_ACTIONS, GUARDRAIL_STAGES } from '../db/schema';
import { compileUserPattern, patternSetTooLarge, patternTooLarge, type PlacedPattern } from '../patterns/user-pattern';

/**
 * Limits that keep one policy's load and scan cheap. A policy's patterns are bounded together
 * as well (core/patterns/user-pattern.ts): their count, and their total RE2 program, which is
 * what each scanned character costs.
 */
export const MAX_RULES = 50;
export const MAX_WORDS = 1000;
export const MAX_PATTERNS = 20;
export const MAX_PATTERN_LENGTH = 500;

const base = {
  stage: z.enum(GUARDRAIL_STAGES),
  action: z.enum(GUARDRAIL_ACTIONS),
};

/**
 * A user pattern must compile under RE2 (linear time; no backreferences or lookaround, which
 * are what catastrophic backtracking needs), within the bounds on its program, and must not
 * match the empty string. Too long or too large, it is refused without being compiled.
 */
const userPattern = z.string().min(1).max(MAX_PATTERN_LENGTH, { abort: true }).superRefine((source, ctx) => {
  const tooLarge = patternTooLarge(source);
  if (tooLarge) {
    ctx.addIssue({ code: 'custom', message: `the pattern ${tooLarge}` });
    return;
  }
  try {
    const compiled = compileUserPattern(source);
    if (compiled.matches('')) ctx.addIssue({ code: 'custom', message: `pattern \`${source}\` matches the empty string` });
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `pattern \`${source}\` is not a valid RE2 expression (${(err as Error).message})` });
  }
});

/**
 * One rule (issue 12): `{detector, stage, action}` plus the detector's own options. Detectors
 * without options refuse any. Guardrail rule fields are a gap in spec 2.6; this is our shape.
 */
export const guardrailRuleSchema = z.discriminatedUnion('detector', [
  z.strictObject({ detector: z.literal('email'), ...base }),
  z.strictObject({ detector: z.literal('phone'), ...base }),
  z.strictObject({ detector: z.literal('credit_card'), ...base }),
  z.strictObject({ detector: z.literal('iban'), ...base }),
  z.strictObject({ detector: z.literal('secret'), ...base }),
  z.strictObject({ detector: z.literal('prompt_injection'), ...base }),
  z.strictObject({
    detector: z.literal('keywords'),
    ...base,
    words: z.array(z.string().trim().min(1).max(200)).min(1).max(MAX_WORDS),
    case_sensitive: z.boolean().optional(),
  }),
  z.strictObject({
    detector: z.literal('regex'),
    ...base,
    patterns: z.array(userPattern).min(1).max(MAX_PATTERNS),
    case_insensitive: z.boolean().optional(),
  }),
], { error: (issue) => (issue.code === 'invalid_union' ? 'unknown `detector`; one of email, phone, credit_card, iban, secret, prompt_injection, keywords, regex' : undefined) });

export type GuardrailRuleInput = z.infer<typeof guardrailRuleSchema>;

/** The patterns of a policy's `regex` rules, each with its place (`<rule>.patterns.<n>`). */
function policyPatterns(rules: readonly unknown[]): Array<PlacedPattern & { path: [number, string, number] }> {
  const patterns: Array<PlacedPattern & { path: [number, string, number] }> = [];
  rules.forEach((rule, i) => {
    const { detector, patterns: sources } = (rule ?? {}) as { detector?: unknown; patterns?: unknown };
    if (detector !== 'regex' || !Array.isArray(sources)) return;
    sources.forEach((source: unknown, j) => {
      if (typeof source === 'string') patterns.push({ source, where: `${i}.patterns.${j}`, path: [i, 'patterns', j] });
    });
  });
  return patterns;
}

/**
 * What is wrong with a policy's patterns together (count, sizes, total program; no compiling),
 * or null. The policy cache asks too, so a policy stored before the bounds is not compiled.
 */
export function policyPatternsTooLarge(rules: readonly unknown[]): string | null {
  const problem = patternSetTooLarge(policyPatterns(rules));
  return problem && `\`rules.${problem.pattern.where}\`: the pattern ${problem.reason}`;
}

/**
 * Checked before any rule is read: a policy past the bounds is refused without one of its
 * patterns being compiled (rules are read, and their patterns compiled, only once this passes).
 */
function policyPatternsWithinBounds(rules: unknown, ctx: z.core.$RefinementCtx): unknown {
  if (!Array.isArray(rules)) return rules;
  const problem = patternSetTooLarge(policyPatterns(rules));
  if (problem) ctx.addIssue({ code: 'custom', message: `the pattern ${problem.reason}`, path: problem.pattern.path });
  return rules;
}

export const guardrailRulesSchema = z.preprocess(policyPatternsWithinBounds, z.array(guardrailRuleSchema).max(MAX_RULES));

export const guardrailPolicyFields = {
  enabled: z.boolean(),
  on_engine_error: z.enum(ENGINE_ERROR_ACTIONS),
  rules: guardrailRulesSchema,
};
