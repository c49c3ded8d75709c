import { z } from 'zod';
import { ENGINE_ERROR_ACTIONS, GUARDRAIL_ACTIONS, GUARDRAIL_STAGES } from '../db/schema';
import { compileUserPattern } from './user-pattern';

/** Limits that keep one policy's load and scan cheap. */
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
 * are what catastrophic backtracking needs) and must not match the empty string.
 */
const userPattern = z.string().min(1).max(MAX_PATTERN_LENGTH).superRefine((source, ctx) => {
  try {
    const compiled = compileUserPattern(source, false);
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

export const guardrailRulesSchema = z.array(guardrailRuleSchema).max(MAX_RULES);

export const guardrailPolicyFields = {
  enabled: z.boolean(),
  on_engine_error: z.enum(ENGINE_ERROR_ACTIONS),
  rules: guardrailRulesSchema,
};
