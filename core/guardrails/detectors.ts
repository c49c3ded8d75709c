/**
 * The built-in detectors and the packages behind them (full phone-number metadata, card brands,
 * IBAN formats, RE2, Aho-Corasick). Only an organization with a guardrail policy needs them, so
 * the policy cache loads this module when it first compiles a policy (policy-cache.ts), not at
 * start: a process whose organizations have no policy never holds them.
 */
import cardValidator from 'card-validator';
import { countrySpecs, electronicFormatIBAN, isValidIBAN } from 'ibantools';
import { findPhoneNumbersInText } from 'libphonenumber-js/max';
import AhoCorasick from 'modern-ahocorasick';
import TextMatcher from 'modern-ahocorasick/text';
import { detectPromptInjection } from './prompt-injection';
import type { Span } from './spans';
import { compileUserPattern } from '../patterns/user-pattern';
import type { OffloadPattern } from './regex-offload';

/**
 * A detector compiled with its rule's options: pure, synchronous, linear in the text. One that
 * can run longer (regex) throws once `performance.now()` passes `deadline` (engine.ts), and says
 * what it runs (`regex`), so that a scan too large for the event loop can run on a thread.
 */
export type Detect = ((text: string, deadline?: number) => Span[]) & { regex?: RegexDetect };

/** A regex detector's patterns, and their programs' total size: what each scanned character may cost. */
export type RegexDetect = { patterns: OffloadPattern[]; program: number };

/**
 * A detector kind. `build` runs once per policy load (patterns compiled, matchers built), never
 * per request; what it answers runs on every scanned text. Options were checked by the rule
 * schema (rules.ts) before they reach `build`.
 */
export type DetectorKind = { build(options: Record<string, unknown>): Detect };

export const DETECTOR_NAMES = ['email', 'phone', 'credit_card', 'iban', 'secret', 'prompt_injection', 'keywords', 'regex'] as const;
export type DetectorName = (typeof DETECTOR_NAMES)[number];
export type DetectorRegistry = Record<DetectorName, DetectorKind>;

function spansOf(text: string, pattern: RegExp, keep: (match: string) => boolean = () => true): Span[] {
  const spans: Span[] = [];
  for (const m of text.matchAll(pattern)) {
    if (keep(m[0])) spans.push({ start: m.index, end: m.index + m[0].length });
  }
  return spans;
}

/**
 * Email: a bounded pattern (every repetition has a ceiling, no nested unbounded groups), so it
 * stays linear on hostile input; the domain needs a dot and a 2 to 24 letter top-level label.
 */
const EMAIL = /(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9-])/g;
const email: Detect = (text) => spansOf(text, EMAIL);

/**
 * Phone: libphonenumber-js with full metadata. With no default country only numbers written in
 * international form (`+<country code>`) are found, and each must be a valid number for its
 * country: order ids, timestamps and local numbers are not phone numbers to it.
 */
const phone: Detect = (text) => (INTERNATIONAL_PREFIX.test(text) ? findPhoneNumbersInText(text).map((m) => ({ start: m.startsAt, end: m.endsAt })) : []);
/**
 * Only a number in international form can match (see above): a text without a plus before a
 * digit is not handed to libphonenumber-js, whose scan is the slowest of the detectors (about
 * 1 ms a KB), so ordinary prompts and answers cost one regex test.
 */
const INTERNATIONAL_PREFIX = /[+\uFF0B][\s(]{0,3}\d/;

/** Credit card: 13 to 19 digits (spaces or dashes between), then brand prefix, length and Luhn by card-validator. */
const CARD_CANDIDATE = /(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])/g;
const creditCard: Detect = (text) => spansOf(text, CARD_CANDIDATE, (m) => cardValidator.number(m.replace(/[ -]/g, '')).isValid);

/**
 * IBAN: a candidate in print or electronic form, cut to its country's length, then ibantools'
 * country format and mod-97 checksum.
 */
const IBAN_CANDIDATE = /\b[A-Z]{2}\d{2} ?[A-Z0-9]{1,4}(?: ?[A-Z0-9]{1,4}){2,8}/g;
const iban: Detect = (text) => {
  const spans: Span[] = [];
  for (const m of text.matchAll(IBAN_CANDIDATE)) {
    const length = countrySpecs[m[0].slice(0, 2)]?.chars;
    if (!length) continue;
    let chars = 0;
    let i = 0;
    for (; i < m[0].length && chars < length; i++) if (m[0][i] !== ' ') chars++;
    if (chars !== length || /[A-Z0-9]/.test(text[m.index + i] ?? '')) continue;
    const candidate = electronicFormatIBAN(m[0].slice(0, i));
    if (candidate && isValidIBAN(candidate)) spans.push({ start: m.index, end: m.index + i });
  }
  return spans;
};

/**
 * Secrets: our own table of well-known credential shapes (after gitleaks' and secretlint's
 * rules), each pattern bounded and anchored on a fixed prefix so a scan stays linear.
 */
const SECRET_RULES: ReadonlyArray<readonly [kind: string, pattern: RegExp]> = [
  ['anthropic', /\bsk-ant-(?:api|admin)\d\d-[A-Za-z0-9_-]{80,120}AA(?![A-Za-z0-9_-])/g],
  ['openai', /\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,200}T3BlbkFJ[A-Za-z0-9_-]{20,200}|\bsk-[A-Za-z0-9]{48}\b/g],
  ['aws', /\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b/g],
  ['github', /\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})\b/g],
  ['google', /\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])/g],
  ['slack', /\bxox[abposr]-(?:\d{1,20}-){1,4}[A-Za-z0-9-]{8,100}/g],
  ['stripe', /\b[sr]k_(?:live|test|prod)_[A-Za-z0-9]{10,99}\b/g],
  ['jwt', /\beyJ[A-Za-z0-9_-]{10,4096}\.eyJ[A-Za-z0-9_-]{2,8192}\.[A-Za-z0-9_-]{10,4096}/g],
  ['private_key', /-----BEGIN [A-Z0-9 ]{0,20}PRIVATE KEY(?: BLOCK)?-----[^-]{0,16384}(?:-----END [A-Z0-9 ]{0,20}PRIVATE KEY(?: BLOCK)?-----)?/g],
];
/** Documentation examples that look like credentials and are not. */
const SECRET_EXAMPLES = new Set(['AKIAIOSFODNN7EXAMPLE', 'ASIAIOSFODNN7EXAMPLE']);
const secret: Detect = (text) => SECRET_RULES.flatMap(([, pattern]) => spansOf(text, pattern, (m) => !SECRET_EXAMPLES.has(m)));

/**
 * Keywords: one Aho-Corasick automaton over every word of the rule, Unicode case folding, whole
 * words only. The text matcher folds and segments the text grapheme by grapheme (a third of the
 * API's CPU in the bench with keywords on every answer), so ASCII text against ASCII keywords,
 * the common case, takes a plain automaton over the lower-cased text instead: for ASCII, lower
 * case is full case folding and every character is one grapheme, so offsets are unchanged.
 */
function keywords(options: Record<string, unknown>): Detect {
  const words = options.words as string[];
  const caseFold = options.case_sensitive !== true;
  const matcher = new TextMatcher(words, { caseFold });
  const full: Detect = (text) => matcher.search(text, { strategy: 'leftmost-longest', wholeWord: true }).map((m) => ({ start: m.start, end: m.end }));
  if (!words.every((w) => ASCII.test(w))) return full;
  const fast = new AhoCorasick(words.map((w) => (caseFold ? w.toLowerCase() : w)));
  return (text) => {
    if (!ASCII.test(text)) return full(text);
    const hits = fast.search(caseFold ? text.toLowerCase() : text, { strategy: 'leftmost-longest' });
    return hits.filter((h) => !WORD_CHAR.test(text[h.start - 1] ?? '') && !WORD_CHAR.test(text[h.end] ?? '')).map((h) => ({ start: h.start, end: h.end }));
  };
}
// eslint-disable-next-line no-control-regex -- the whole ASCII range, control characters included
const ASCII = /^[\x00-\x7F]*$/;
const WORD_CHAR = /[A-Za-z0-9_]/;

/**
 * Regex: the rule's patterns, compiled once when the policy loads; empty matches are skipped.
 * Each search is linear in the text, but finding every match is not always (engine.ts,
 * SCAN_DEADLINE_BASE_MS): past the scan's deadline, checked after each match, it gives up. A
 * scan whose worst case is too large for the event loop runs on a thread instead (engine.ts,
 * regex-offload.ts), with the patterns as written here.
 */
function regex(options: Record<string, unknown>): Detect {
  const caseInsensitive = options.case_insensitive === true;
  const sources = options.patterns as string[];
  const patterns = sources.map((p) => compileUserPattern(p, caseInsensitive));
  const detect: Detect = (text, deadline = Infinity) => {
    const spans: Span[] = [];
    for (const pattern of patterns) {
      const m = pattern.matcher(text);
      while (m.find()) {
        if (m.end() > m.start()) spans.push({ start: m.start(), end: m.end() });
        if (performance.now() > deadline) throw new Error('a regex rule ran past the scan\'s deadline');
      }
    }
    return spans;
  };
  detect.regex = { patterns: sources.map((source) => ({ source, caseInsensitive })), program: patterns.reduce((n, p) => n + p.programSize(), 0) };
  return detect;
}

const fixed = (detect: Detect): DetectorKind => ({ build: () => detect });

/** The detectors a rule may name (spec 2.6; issue 12). */
export const BUILTIN_DETECTORS: DetectorRegistry = {
  email: fixed(email),
  phone: fixed(phone),
  credit_card: fixed(creditCard),
  iban: fixed(iban),
  secret: fixed(secret),
  prompt_injection: fixed(detectPromptInjection),
  keywords: { build: keywords },
  regex: { build: regex },
};
