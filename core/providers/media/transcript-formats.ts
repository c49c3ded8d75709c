import type { FieldOverrides } from '../../http/multipart';
import type { TranscriptionFormat } from './types';

/**
 * A transcription is priced by the audio's length, which only some answers state (issue 20):
 * `verbose_json` carries `duration`, a gpt-4o model's `json` its token usage, and `text`, `srt`
 * and `vtt` nothing at all. So the gateway asks the provider for a format that states it and
 * renders what the client asked from that answer; the client's own header is never what a
 * transcription settles at.
 */

/** gpt-4o transcribe models bill tokens, which their `json` reports; they take only json and text. */
function tokenBilled(model: string, modelId: string | undefined): boolean {
  const named = (name: string) => /^gpt-4o.*transcribe/.test(name.slice(name.indexOf('/') + 1));
  return named(model) || (modelId !== undefined && named(modelId));
}

/**
 * The format to ask upstream for what the client asked: the client's own when it already
 * reports the length (or a provider would refuse it anyway), else `verbose_json` (`json` for a
 * token-billed model asked for `text`). `timestamp_granularities[]` is valid only with
 * verbose_json, so a request carrying it is sent as asked, for the provider to judge.
 */
export function measuringFormat(asked: TranscriptionFormat, fields: Record<string, unknown>, model: string, modelId?: string): TranscriptionFormat {
  if (asked === 'verbose_json') return asked;
  if (tokenBilled(model, modelId)) return asked === 'text' ? 'json' : asked;
  if (fields['timestamp_granularities[]'] !== undefined) return asked;
  return 'verbose_json';
}

/** The field override that asks `upstream` when it is not what the client asked. */
export function formatOverride(asked: TranscriptionFormat, upstream: TranscriptionFormat): FieldOverrides {
  return upstream === asked ? {} : { response_format: upstream };
}

type Segment = { start: number; end: number; text: string };

function timestamp(seconds: number, separator: ',' | '.'): string {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const pad = (x: number, n = 2) => String(x).padStart(n, '0');
  return `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}${separator}${pad(ms % 1000, 3)}`;
}

/** The answer's timed segments; one segment over the whole audio when it gives none. */
function segmentsOf(body: Record<string, unknown>, text: string, durationSeconds: number | null): Segment[] {
  const listed = Array.isArray(body.segments) ? body.segments as Array<Record<string, unknown>> : [];
  const segments = listed
    .filter((s) => typeof s?.start === 'number' && typeof s.end === 'number' && typeof s.text === 'string')
    .map((s) => ({ start: s.start as number, end: s.end as number, text: s.text as string }));
  return segments.length > 0 ? segments : [{ start: 0, end: durationSeconds ?? 0, text }];
}

/**
 * The transcript in the format the client asked, from the JSON answer the provider gave:
 * `json` is `{text, usage}` as OpenAI answers it, `text` the text and a newline, `srt` and
 * `vtt` one cue a segment, as OpenAI writes them. The same format passes through unchanged.
 */
export function transcriptAs(asked: TranscriptionFormat, upstream: TranscriptionFormat, body: Record<string, unknown> | string, durationSeconds: number | null): Record<string, unknown> | string {
  if (asked === upstream || typeof body === 'string') return body;
  const text = typeof body.text === 'string' ? body.text : '';
  switch (asked) {
    case 'json':
      return { text, ...(body.usage !== undefined && { usage: body.usage }), ...(body.logprobs !== undefined && { logprobs: body.logprobs }) };
    case 'text':
      return `${text}\n`;
    case 'srt':
      return `${segmentsOf(body, text, durationSeconds).map((s, i) => `${i + 1}\n${timestamp(s.start, ',')} --> ${timestamp(s.end, ',')}\n${s.text.trim()}\n`).join('\n')}\n`;
    case 'vtt':
      return `WEBVTT\n\n${segmentsOf(body, text, durationSeconds).map((s) => `${timestamp(s.start, '.')} --> ${timestamp(s.end, '.')}\n${s.text.trim()}\n`).join('\n')}\n`;
    default:
      return body;
  }
}
