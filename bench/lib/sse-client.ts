/**
 * Streams measured from the client side: time to the first content chunk, the gaps between
 * content chunks, and whether every chunk the mock sent arrived (the assembled text is exact).
 */
import { Agent, request } from 'undici';
import { EXPECTED_STREAM_TEXT } from '../mock-upstream';

export type StreamResult = { ok: boolean; ttfcMs: number; gapsMs: number[]; error?: string };

const agent = new Agent({ connections: null, keepAliveTimeout: 30_000, headersTimeout: 60_000, bodyTimeout: 60_000 });

export async function oneStream(url: string, headers: Record<string, string>, body: string): Promise<StreamResult> {
  const started = performance.now();
  let ttfcMs = NaN;
  let last = NaN;
  const gapsMs: number[] = [];
  let text = '';
  let done = false;
  try {
    const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body, dispatcher: agent });
    if (res.statusCode !== 200) {
      const detail = (await res.body.text()).slice(0, 200);
      return { ok: false, ttfcMs, gapsMs, error: `HTTP ${res.statusCode} ${detail}` };
    }
    let buffer = '';
    res.body.setEncoding('utf8');
    for await (const part of res.body as AsyncIterable<string>) {
      const now = performance.now();
      buffer += part;
      let end: number;
      while ((end = buffer.search(/\r?\n\r?\n/)) !== -1) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer[end] === '\r' ? 4 : 2));
        for (const line of event.split(/\r?\n/)) {
          if (!line.startsWith('data:')) continue;
          const data = line.slice(5).trim();
          if (data === '[DONE]') {
            done = true;
            continue;
          }
          // A chat completion chunk, an Anthropic Messages event or an OpenAI Responses event (their text deltas, their end).
          const parsed = JSON.parse(data) as { type?: string; choices?: Array<{ delta?: { content?: string } }>; delta?: string | { text?: string } };
          if (parsed.type === 'message_stop' || parsed.type === 'response.completed') {
            done = true;
            continue;
          }
          const content = parsed.type === 'content_block_delta' ? (parsed.delta as { text?: string }).text
            : parsed.type === 'response.output_text.delta' ? (parsed.delta as string)
            : parsed.choices?.[0]?.delta?.content;
          if (!content) continue;
          text += content;
          if (Number.isNaN(ttfcMs)) ttfcMs = now - started;
          else gapsMs.push(now - last);
          last = now;
        }
      }
    }
    const ok = done && text === EXPECTED_STREAM_TEXT;
    return { ok, ttfcMs, gapsMs, ...(!ok && { error: done ? 'text differs' : 'no end (`[DONE]`, `message_stop` or `response.completed`)' }) };
  } catch (err) {
    return { ok: false, ttfcMs, gapsMs, error: (err as Error).message };
  }
}

/** n streams at once, or with `staggerMs` one started every so many milliseconds. */
export function streams(n: number, url: string, headers: Record<string, string>, body: string, staggerMs = 0): Promise<StreamResult[]> {
  return Promise.all(Array.from({ length: n }, async (_, i) => {
    if (staggerMs) await new Promise((r) => setTimeout(r, i * staggerMs));
    return oneStream(url, headers, body);
  }));
}
