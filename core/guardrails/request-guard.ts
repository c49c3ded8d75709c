import type { GuardrailOutcome } from '../db/schema';
import { GatewayError } from '../errors';
import type { ChatMessage, Choice, ContentPart } from '../providers/types';
import { ENFORCED, EVERY_ACTION, redactSegment, scan, type ActiveRules, type Finding, type ScanResult } from './engine';

export type GuardrailWord = GuardrailOutcome['action'];

/** Where a message's text sits: its string content, or one text part. */
type Slot = { message: number; part: number | null };

function inputSegments(messages: readonly ChatMessage[]): { texts: string[]; slots: Slot[] } {
  const texts: string[] = [];
  const slots: Slot[] = [];
  messages.forEach((m, message) => {
    if (typeof m.content === 'string') {
      texts.push(m.content);
      slots.push({ message, part: null });
    } else if (Array.isArray(m.content)) {
      m.content.forEach((p, part) => {
        if (p.type === 'text' && typeof p.text === 'string') {
          texts.push(p.text);
          slots.push({ message, part });
        }
      });
    }
  });
  return { texts, slots };
}

/** The messages with some texts replaced; untouched messages are the same objects. */
function withTexts(messages: readonly ChatMessage[], slots: readonly Slot[], texts: readonly string[], original: readonly string[]): ChatMessage[] {
  const out = messages.slice();
  slots.forEach((slot, i) => {
    if (texts[i] === original[i]) return;
    const m = out[slot.message]!;
    if (slot.part === null) {
      out[slot.message] = Object.assign({}, m, { content: texts[i]! });
    } else {
      const parts = (m.content as ContentPart[]).slice();
      parts[slot.part] = Object.assign({}, parts[slot.part]!, { text: texts[i]! });
      out[slot.message] = Object.assign({}, m, { content: parts });
    }
  });
  return out;
}

function refusalFor(result: ScanResult, stage: 'input' | 'output'): GatewayError | null {
  if (result.unavailable) {
    return new GatewayError('guardrail_unavailable', `A guardrail detector (\`${result.unavailable}\`) could not check the ${stage === 'input' ? 'request' : 'answer'}, and its policy blocks when that happens.`);
  }
  if (result.strictest === 'block') {
    const detectors = result.findings.filter((f) => f.action === 'block').map((f) => `\`${f.detector}\``).join(', ');
    return new GatewayError('guardrail_blocked', `A guardrail blocked the ${stage === 'input' ? 'request' : 'answer'} (${detectors}).`);
  }
  return null;
}

/**
 * One chat request's guardrails: the input check before anything is reserved or sent, the
 * output check on the answer, and what they add up to for the answer, the header and the
 * request log. Holds counts and spans only; matched text is never copied anywhere but into
 * the redacted texts it replaces.
 */
export class RequestGuard {
  private findings: Finding[] = [];
  private blocked = false;
  private redactedApplied = false;
  private engineFailure: { detector: string; stage: 'input' | 'output' } | null = null;
  /** The input's strictest outcome word, for a stream's header. */
  private inputWord: GuardrailWord | null = null;
  /** Detectors that failed under `on_engine_error: allow`, for a log line (names only). */
  readonly skipped: string[] = [];
  /** The messages as the request log may store them: every match redacted, whatever its action. */
  logMessages: ChatMessage[] | null = null;
  /** The answer's texts as the request log may store them, when the output check found anything. */
  logAnswer: string[] | null = null;

  constructor(
    private readonly rules: ActiveRules,
    /** The organization: its turn on the regex offload thread (engine.ts). */
    private readonly tenant = '',
  ) {}

  /** True when the answer will be checked, so a stream must keep its text and hold its finish chunks. */
  get checksOutput(): boolean {
    return this.rules.output.length > 0;
  }

  /**
   * Spec 2.6 input stage: redacts in place what the rules redact and answers the messages to
   * send, or the 403 to answer (`guardrail_blocked`, `guardrail_unavailable`).
   */
  async checkInput(messages: ChatMessage[]): Promise<{ messages: ChatMessage[]; refusal: GatewayError | null }> {
    if (this.rules.input.length === 0) return { messages, refusal: null };
    const { texts, slots } = inputSegments(messages);
    const result = await scan(this.rules.input, texts, 'input', this.tenant);
    this.skipped.push(...result.skipped);
    this.record(result, 'input', true);
    this.inputWord = this.word();
    if (result.findings.length > 0) {
      this.logMessages = withTexts(messages, slots, texts.map((t, i) => redactSegment(t, result.spans[i]!, EVERY_ACTION)), texts);
    }
    const refusal = refusalFor(result, 'input');
    if (refusal || result.strictest !== 'redact') return { messages, refusal };
    const sent = texts.map((t, i) => redactSegment(t, result.spans[i]!, ENFORCED));
    return { messages: withTexts(messages, slots, sent, texts), refusal: null };
  }

  /**
   * Output stage on a whole answer: redacts each choice's text in place, or answers the 403 to
   * give instead of the answer (the provider was called and billed all the same).
   */
  async checkAnswer(choices: Choice[]): Promise<GatewayError | null> {
    if (this.rules.output.length === 0) return null;
    const texts = choices.map((c) => (typeof c.message.content === 'string' ? c.message.content : ''));
    const result = await scan(this.rules.output, texts, 'output', this.tenant);
    this.skipped.push(...result.skipped);
    this.record(result, 'output', true);
    if (result.findings.length > 0) this.logAnswer = texts.map((t, i) => redactSegment(t, result.spans[i]!, EVERY_ACTION));
    const refusal = refusalFor(result, 'output');
    if (refusal || result.strictest !== 'redact') return refusal;
    choices.forEach((c, i) => {
      if (typeof c.message.content === 'string') c.message.content = redactSegment(texts[i]!, result.spans[i]!, ENFORCED);
    });
    return null;
  }

  /**
   * Output stage on a stream, on the assembled text of each choice once it ended. What was sent
   * cannot be taken back: a `redact` rule's match is reported (the finding keeps `redact`) but
   * counts as flagged, and a block or an engine failure ends the stream with an error event.
   */
  async checkStreamEnd(assembled: readonly string[]): Promise<GatewayError | null> {
    if (this.rules.output.length === 0) return null;
    // Choices are assembled by index; one that sent no text is an empty string.
    const texts = Array.from(assembled, (t) => t ?? '');
    const result = await scan(this.rules.output, texts, 'output', this.tenant);
    this.skipped.push(...result.skipped);
    this.record(result, 'output', false);
    if (result.findings.length > 0) this.logAnswer = texts.map((t, i) => redactSegment(t, result.spans[i]!, EVERY_ACTION));
    return refusalFor(result, 'output');
  }

  /** The choices as the request log may store them: the output check's matches redacted. */
  logChoices(choices: readonly Choice[]): Choice[] | null {
    const texts = this.logAnswer;
    if (!texts) return null;
    return choices.map((c, i) => (typeof c.message.content === 'string' ? Object.assign({}, c, { message: Object.assign({}, c.message, { content: texts[i]! }) }) : c));
  }

  private record(result: ScanResult, stage: 'input' | 'output', redactionApplies: boolean): void {
    this.findings.push(...result.findings);
    if (result.unavailable) {
      this.blocked = true;
      this.engineFailure = { detector: result.unavailable, stage };
    }
    if (result.strictest === 'block') this.blocked = true;
    if (result.strictest === 'redact' && redactionApplies) this.redactedApplied = true;
  }

  private word(): GuardrailWord | null {
    if (this.blocked) return 'blocked';
    if (this.redactedApplied) return 'redacted';
    return this.findings.length > 0 ? 'flagged' : null;
  }

  /** `X-GW-Guardrails` (spec 4.1): the whole outcome, or on a stream the input check's only. */
  header(stream: boolean): GuardrailWord | null {
    return stream ? this.inputWord : this.word();
  }

  /** The answer's `guardrails` field (spec 2.2), present only when a guardrail acted. */
  field(): { action: GuardrailWord; findings: Finding[] } | null {
    const action = this.word();
    return action && this.findings.length > 0 ? { action, findings: this.findings } : null;
  }

  /**
   * What the request log records: the field, or for an engine failure that blocked, the failed
   * detector as a finding with action `error` and count 0.
   */
  outcome(): GuardrailOutcome | null {
    const action = this.word();
    if (!action) return null;
    const findings: GuardrailOutcome['findings'] = [...this.findings];
    if (this.engineFailure) findings.push(Object.assign({}, this.engineFailure, { action: 'error' as const, count: 0 }));
    return { action, findings };
  }
}
