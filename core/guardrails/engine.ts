import type { GuardrailPolicy } from '../db/schema';
import type { Detect, DetectorName, DetectorRegistry } from './detectors';
import { policyPatternsTooLarge } from './rules';
import { regexOffload } from './regex-offload';
import { mergeSpans, redact, type Span } from './spans';

export type GuardrailStage = 'input' | 'output';
export type GuardrailAction = 'redact' | 'flag' | 'block';
export type EngineErrorAction = 'block' | 'allow';

/** What an answer and the request log say about one detector at one stage: counts, never text. */
export type Finding = { detector: string; stage: GuardrailStage; action: GuardrailAction; count: number };

/**
 * One detector with one set of options, as every applicable policy asked for it: the strictest
 * action (block > redact > flag) and the strictest `on_engine_error` (block > allow) of the
 * rules that named it.
 */
export type RuleGroup = { detector: DetectorName; action: GuardrailAction; onEngineError: EngineErrorAction; detect: Detect };

/** The rules that apply to one key's requests, per stage, merged over organization, project and key. */
export type ActiveRules = { input: readonly RuleGroup[]; output: readonly RuleGroup[] };

/**
 * Scanned text per stage is capped: above it the text cannot be checked in bounded time, which
 * is treated like a detector failure (`on_engine_error`).
 */
export const MAX_SCAN_CHARS = 1_000_000;

/**
 * A `regex` rule's scan runs on the event loop only when its worst case is small: its patterns'
 * programs times the stage's characters at most INLINE_REGEX_WORK (about 10 ms at the 33 ns an
 * instruction a character RE2 costs at worst, bench/results/2026-11-29-issue-52-pattern-bounds.md),
 * and only for INLINE_REGEX_MS: finding every match can be quadratic in the text whatever the
 * program (`a*b|a` over a run of `a` reads to the end for each one-letter match), so a scan
 * still going then is dropped and made again on the offload thread (regex-offload.ts). Benign
 * patterns over ordinary prompts finish inline in microseconds.
 */
export const INLINE_REGEX_WORK = 300_000;
export const INLINE_REGEX_MS = 5;

/**
 * On the offload thread a scan may run SCAN_DEADLINE_BASE_MS plus SCAN_DEADLINE_US_PER_CHAR a
 * scanned character (about twice what patterns at the bounds take over ordinary text), at most
 * SCAN_DEADLINE_MAX_MS; past it the thread is ended and the rule fails, so `on_engine_error`
 * decides, as for a text past MAX_SCAN_CHARS. Only the regex detector can run long.
 */
export const SCAN_DEADLINE_BASE_MS = 50;
export const SCAN_DEADLINE_US_PER_CHAR = 250;
export const SCAN_DEADLINE_MAX_MS = 5_000;

const ACTION_RANK: Record<GuardrailAction, number> = { flag: 0, redact: 1, block: 2 };
export const stricter = (a: GuardrailAction, b: GuardrailAction): GuardrailAction => (ACTION_RANK[a] >= ACTION_RANK[b] ? a : b);

/** A rule compiled for one policy; the group key joins equal detectors across policies. */
type CompiledRule = { key: string; detector: DetectorName; stages: GuardrailStage[]; action: GuardrailAction; detect: Detect };
export type CompiledPolicy = { onEngineError: EngineErrorAction; rules: CompiledRule[] };

/** A detector that could not be built fails when asked, so `on_engine_error` decides. */
function failing(err: unknown): Detect {
  return () => {
    throw err;
  };
}

function optionsKey(rule: Record<string, unknown>): string {
  const { detector, stage: _s, action: _a, ...options } = rule;
  const names = Object.keys(options).sort();
  return names.length === 0 ? String(detector) : `${String(detector)}\u0000${JSON.stringify(names.map((n) => [n, options[n]]))}`;
}

/**
 * Builds every rule's detector once, when a policy loads (patterns compiled, matchers made). A
 * policy whose patterns together are past the bounds (one stored before them) compiles none of
 * them: its `regex` rules fail when asked.
 */
export function compilePolicy(policy: GuardrailPolicy, detectors: DetectorRegistry): CompiledPolicy | null {
  if (!policy.enabled || policy.rules.length === 0) return null;
  const patternsRefused = policyPatternsTooLarge(policy.rules);
  const rules = policy.rules.map((rule): CompiledRule => {
    const detector = rule.detector as DetectorName;
    let detect: Detect;
    try {
      const kind = Object.hasOwn(detectors, detector) ? detectors[detector] : undefined;
      if (!kind) throw new Error(`unknown detector ${detector}`);
      if (detector === 'regex' && patternsRefused) throw new Error(`the policy's patterns are past the bounds (${patternsRefused})`);
      detect = kind.build(rule);
    } catch (err) {
      detect = failing(err);
    }
    const stages: GuardrailStage[] = rule.stage === 'both' ? ['input', 'output'] : [rule.stage];
    return { key: optionsKey(rule), detector, stages, action: rule.action, detect };
  });
  return { onEngineError: policy.on_engine_error, rules };
}

/** Merges the applicable policies' rules: one group per detector and options, strictest action. */
export function mergePolicies(policies: ReadonlyArray<CompiledPolicy | null>): ActiveRules | null {
  const groups = { input: new Map<string, RuleGroup>(), output: new Map<string, RuleGroup>() };
  for (const policy of policies) {
    if (!policy) continue;
    for (const rule of policy.rules) {
      for (const stage of rule.stages) {
        const seen = groups[stage].get(rule.key);
        if (seen) {
          seen.action = stricter(seen.action, rule.action);
          if (policy.onEngineError === 'block') seen.onEngineError = 'block';
        } else {
          groups[stage].set(rule.key, { detector: rule.detector, action: rule.action, onEngineError: policy.onEngineError, detect: rule.detect });
        }
      }
    }
  }
  if (groups.input.size === 0 && groups.output.size === 0) return null;
  return { input: [...groups.input.values()], output: [...groups.output.values()] };
}

export type LabelledSpan = Span & { detector: string; action: GuardrailAction };

/** What one stage's scan found. */
export type ScanResult = {
  findings: Finding[];
  /** The strictest finding's action, or null when nothing matched. */
  strictest: GuardrailAction | null;
  /** Set when a detector failed under a policy with `on_engine_error: block`. */
  unavailable: string | null;
  /** Detectors that failed under `allow`: the request carried on without them. */
  skipped: string[];
  /** Matched spans per segment, or null for a segment where nothing matched. */
  spans: Array<LabelledSpan[] | null>;
};

/**
 * What one group found in each segment. Synchronous for every detector but a `regex` rule whose
 * scan is too large for the event loop (INLINE_REGEX_WORK, INLINE_REGEX_MS), which is made on the
 * offload thread: then a promise. Throws (or rejects) when the detector fails.
 */
function detectAll(group: RuleGroup, segments: readonly string[], total: number, tenant: string): Span[][] | Promise<Span[][]> {
  const regex = group.detect.regex;
  if (regex && regex.program * total > INLINE_REGEX_WORK) return offloaded(regex.patterns, segments, total, tenant);
  const deadline = regex ? performance.now() + INLINE_REGEX_MS : Infinity;
  try {
    return segments.map((segment) => (segment.length === 0 ? [] : group.detect(segment, deadline)));
  } catch (err) {
    if (regex && performance.now() > deadline) return offloaded(regex.patterns, segments, total, tenant);
    throw err;
  }
}

async function offloaded(patterns: NonNullable<RuleGroup['detect']['regex']>['patterns'], segments: readonly string[], total: number, tenant: string): Promise<Span[][]> {
  const deadlineMs = Math.min(SCAN_DEADLINE_MAX_MS, SCAN_DEADLINE_BASE_MS + Math.ceil((total * SCAN_DEADLINE_US_PER_CHAR) / 1000));
  const flat = await regexOffload().scan(tenant, patterns, segments, deadlineMs);
  return flat.map((list) => {
    const spans: Span[] = [];
    for (let i = 0; i < list.length; i += 2) spans.push({ start: list[i]!, end: list[i + 1]! });
    return spans;
  });
}

/**
 * Runs every group of a stage over the segments (message texts, or answer texts). Spans are
 * per segment; a detector's count is its merged spans over all segments, its action the
 * strictest of its groups that matched (one finding per detector and stage). `tenant` (the
 * organization) takes its turn on the offload thread, when a regex scan goes there.
 */
export async function scan(groups: readonly RuleGroup[], segments: readonly string[], stage: GuardrailStage, tenant = ''): Promise<ScanResult> {
  const result: ScanResult = { findings: [], strictest: null, unavailable: null, skipped: [], spans: segments.map(() => null) };
  if (groups.length === 0) return result;
  let total = 0;
  for (const s of segments) total += s.length;
  if (total > MAX_SCAN_CHARS) {
    const blocking = groups.find((g) => g.onEngineError === 'block');
    if (blocking) result.unavailable = blocking.detector;
    else result.skipped = [...new Set(groups.map((g) => g.detector))];
    return result;
  }
  const byDetector = new Map<string, { action: GuardrailAction; perSegment: Span[][] }>();
  for (const group of groups) {
    let found: Span[][];
    try {
      const detected = detectAll(group, segments, total, tenant);
      found = Array.isArray(detected) ? detected : await detected;
    } catch {
      if (group.onEngineError === 'block') {
        result.unavailable = group.detector;
        return result;
      }
      result.skipped.push(group.detector);
      continue;
    }
    if (!found.some((spans) => spans.length > 0)) continue;
    const entry = byDetector.get(group.detector);
    if (entry) entry.action = stricter(entry.action, group.action);
    else byDetector.set(group.detector, { action: group.action, perSegment: segments.map(() => []) });
    const target = byDetector.get(group.detector)!;
    found.forEach((spans, i) => {
      if (spans.length === 0) return;
      target.perSegment[i]!.push(...spans);
      (result.spans[i] ??= []).push(...spans.map((s) => ({ start: s.start, end: s.end, detector: group.detector, action: group.action })));
    });
  }
  for (const [detector, { action, perSegment }] of byDetector) {
    const count = perSegment.reduce((n, spans) => n + mergeSpans(spans).length, 0);
    result.findings.push({ detector, stage, action, count });
    result.strictest = result.strictest ? stricter(result.strictest, action) : action;
  }
  return result;
}

/** A segment with the spans of the given actions replaced by `[REDACTED:<DETECTOR>]`. */
export function redactSegment(text: string, spans: readonly LabelledSpan[] | null, actions: ReadonlySet<GuardrailAction>): string {
  if (!spans) return text;
  const chosen = spans.filter((s) => actions.has(s.action));
  return chosen.length === 0 ? text : redact(text, chosen);
}

export const ENFORCED: ReadonlySet<GuardrailAction> = new Set(['redact']);
/** For what the request log keeps: every match goes, whatever the rule's action. */
export const EVERY_ACTION: ReadonlySet<GuardrailAction> = new Set(['redact', 'flag', 'block']);
