/** Where a detector matched, as UTF-16 offsets into the text it was given. Never the text itself. */
export type Span = { start: number; end: number };

/** Sorted, overlapping or touching spans merged into one. */
export function mergeSpans(spans: readonly Span[]): Span[] {
  if (spans.length <= 1) return spans.slice();
  const sorted = spans.slice().sort((a, b) => a.start - b.start || b.end - a.end);
  const merged: Span[] = [{ ...sorted[0]! }];
  for (let i = 1; i < sorted.length; i++) {
    const span = sorted[i]!;
    const last = merged[merged.length - 1]!;
    if (span.start <= last.end) last.end = Math.max(last.end, span.end);
    else merged.push({ ...span });
  }
  return merged;
}

/**
 * Replaces each labelled span with `[REDACTED:<DETECTOR>]`. Overlapping spans of different
 * detectors become one replacement, labelled by the detector whose span starts first.
 */
export function redact(text: string, spans: ReadonlyArray<Span & { detector: string }>): string {
  if (spans.length === 0) return text;
  const sorted = spans.slice().sort((a, b) => a.start - b.start || b.end - a.end);
  let out = '';
  let at = 0;
  let i = 0;
  while (i < sorted.length) {
    const first = sorted[i]!;
    let end = first.end;
    i++;
    while (i < sorted.length && sorted[i]!.start < end) end = Math.max(end, sorted[i++]!.end);
    out += `${text.slice(at, Math.max(at, first.start))}[REDACTED:${first.detector.toUpperCase()}]`;
    at = Math.max(at, end);
  }
  return out + text.slice(at);
}
