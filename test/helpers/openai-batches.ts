import OpenAI, { toFile } from 'openai';
import { randomClientAddress } from './harness';
import { until } from './until';

/** One line of a batch's output or error file, as OpenAI writes it. */
export type OutputLine = { id: string; custom_id: string; response: { status_code: number; request_id: string | null; body: Record<string, unknown> } | null; error: { code: string; message: string } | null };

/** A chat-completions line of a batch input. */
export const chatLine = (customId: string, content: string, model: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ custom_id: customId, method: 'POST', url: '/v1/chat/completions', body: { model, messages: [{ role: 'user', content }], ...extra } });

/**
 * The unmodified `openai` SDK on the gateway's Batch API: a client per key (each from its own
 * address, so rate limits stay per test), an upload of JSONL lines, a wait for the batch's end,
 * and the lines of an output or error file.
 */
export function openAIBatches(apiUrl: () => string) {
  const clientFor = (secret: string) => new OpenAI({ apiKey: secret, baseURL: `${apiUrl()}/v1`, maxRetries: 0, defaultHeaders: { 'x-forwarded-for': randomClientAddress() } });
  const upload = async (client: OpenAI, lines: string[]) => client.files.create({ file: await toFile(Buffer.from(`${lines.join('\n')}\n`), 'input.jsonl'), purpose: 'batch' });
  const ended = (client: OpenAI, id: string, timeoutMs = 60_000) => until(async () => {
    const batch = await client.batches.retrieve(id);
    return ['completed', 'failed', 'expired', 'cancelled'].includes(batch.status) ? batch : null;
  }, `batch ${id} ending`, timeoutMs, 100);
  const linesOf = async (client: OpenAI, fileId: string | null | undefined): Promise<OutputLine[]> => {
    if (!fileId) return [];
    const text = await (await client.files.content(fileId)).text();
    return text.split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as OutputLine);
  };
  return { clientFor, upload, ended, linesOf };
}
