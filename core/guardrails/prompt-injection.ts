import type { Span } from './spans';

/**
 * Prompt injection: a maintained, weighted phrase set (no npm classifier we found was both
 * maintained and free of a model download). Each phrase family has a weight; a text whose
 * matched weights add up to THRESHOLD or more is an injection, and every matched phrase in it
 * is a finding (and what redaction replaces). Strong families (1.0) are enough alone: an order
 * to drop earlier instructions, a claim of a jailbreak mode, raw chat-template control tokens.
 * Weak ones (0.5) also occur in harmless text ("how do I print the system prompt variable?")
 * and need a second sign. Phrasings no family covers are missed: this is a tripwire for the
 * common attacks, not a classifier.
 *
 * To maintain: add a family with a test fixture of a true and a false positive in
 * test/unit/guardrail-detectors.test.ts. Every pattern is bounded (no nested unbounded
 * repetition), so a scan stays linear.
 */
const W = '[ \\t]{1,4}';
const OPT_WORDS = (words: string) => `(?:(?:${words})${W}){0,3}`;

type Family = { weight: number; pattern: RegExp };

const FAMILIES: readonly Family[] = [
  // "Ignore all previous instructions", "disregard the above rules", "forget your prior prompt"
  {
    weight: 1,
    pattern: new RegExp(
      `\\b(?:ignore|disregard|forget|override|bypass|skip)${W}${OPT_WORDS('all|any|every|the|your|my|of|these|those')}(?:previous|prior|preceding|earlier|above|former|original|initial|system)${W}(?:instructions?|prompts?|rules|directions|directives|guidelines|context|messages?)\\b`,
      'gi',
    ),
  },
  // "Ignore the above and ..." / "disregard everything above"
  { weight: 1, pattern: new RegExp(`\\b(?:ignore|disregard|forget)${W}(?:the|everything|all)${W}(?:above|before)\\b`, 'gi') },
  // Jailbreak modes
  { weight: 1, pattern: /\b(?:DAN mode|do anything now|developer mode (?:enabled|activated|on)|jailbreak(?:ed)? mode|you are (?:now )?jailbroken)\b/gi },
  // Raw chat-template control tokens smuggled into content
  { weight: 1, pattern: /<\|im_start\|>|<\|im_end\|>|<\|system\|>|<\|endoftext\|>|\[\/?INST\]|<<\/?SYS>>/gi },
  // "New instructions:", "system override"
  { weight: 1, pattern: /\b(?:new|updated|real) (?:system )?instructions:|\bsystem (?:override|prompt override)\b/gi },
  // Asking for the hidden prompt
  { weight: 0.5, pattern: new RegExp(`\\b(?:reveal|show|print|repeat|output|leak|display)${W}(?:me${W})?(?:your|the)${W}(?:system${W}prompt|initial${W}instructions|hidden${W}(?:instructions|prompt))\\b`, 'gi') },
  // Role reassignment
  { weight: 0.5, pattern: /\b(?:from now on,? you (?:are|will)|you are no longer (?:an? )?(?:AI|assistant|bound)|pretend (?:that )?you (?:are|have) no (?:restrictions|rules|guidelines|filters|limits))\b/gi },
  // Asking to drop safety
  { weight: 0.5, pattern: /\b(?:without any (?:restrictions|filters|censorship|limitations)|(?:bypass|disable|turn off) (?:your |the |all )?(?:safety|content|guardrails?|filters?|restrictions)|act as an? (?:unrestricted|unfiltered|uncensored) )/gi },
];

const THRESHOLD = 1;

export function detectPromptInjection(text: string): Span[] {
  let score = 0;
  const spans: Span[] = [];
  for (const family of FAMILIES) {
    let matched = false;
    for (const m of text.matchAll(family.pattern)) {
      matched = true;
      spans.push({ start: m.index, end: m.index + m[0].length });
    }
    if (matched) score += family.weight;
  }
  return score >= THRESHOLD ? spans : [];
}
