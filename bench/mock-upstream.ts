/**
 * The bench's upstream: an OpenAI-compatible chat endpoint with prebuilt answers, in its own
 * process (`node --import tsx bench/mock-upstream.ts <port>`; prints `listening <port>`).
 *
 * Modes, chosen by the request so that every subject reaches them unchanged:
 * - a body with `"stream":true`: SSE, 64 content chunks 20 ms apart (the first at once), then a
 *   usage chunk and `[DONE]`; chunk i carries the text `c<i> `, so a client can check that none
 *   was lost;
 * - a path starting `/delay20/` (so a base URL `<mock>/delay20/v1` selects it): the answer after
 *   20 ms;
 * - anything else: the answer at once (about 1.4 KB of JSON, with `usage`).
 * `GET /v1/models` answers too (a provider connection's `validate` asks it).
 */
import http from 'node:http';

export const STREAM_CHUNKS = 64;
export const STREAM_GAP_MS = 20;
const DELAY_MS = 20;

const answerText = 'The quick brown fox jumps over the lazy dog. '.repeat(22).trim();
const ANSWER = Buffer.from(
  JSON.stringify({
    id: 'chatcmpl-bench0000000000000000000000',
    object: 'chat.completion',
    created: 1_763_800_000,
    model: 'gpt-4o-mini-2024-07-18',
    choices: [{ index: 0, message: { role: 'assistant', content: answerText, refusal: null, annotations: [] }, logprobs: null, finish_reason: 'stop' }],
    usage: {
      prompt_tokens: 12,
      completion_tokens: 220,
      total_tokens: 232,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    },
    service_tier: 'default',
    system_fingerprint: 'fp_bench',
  }),
);
const ANSWER_HEADERS = { 'content-type': 'application/json', 'content-length': String(ANSWER.length) };
const MODELS = Buffer.from(JSON.stringify({ object: 'list', data: [{ id: 'gpt-4o-mini', object: 'model', created: 1_700_000_000, owned_by: 'system' }] }));

const chunk = (delta: object, finish: string | null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_763_800_000, model: 'gpt-4o-mini-2024-07-18', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
const STREAM_EVENTS = Array.from({ length: STREAM_CHUNKS }, (_, i) => Buffer.from(chunk(i === 0 ? { role: 'assistant', content: `c${i} ` } : { content: `c${i} ` }, null)));
const STREAM_END = Buffer.from(
  chunk({}, 'stop') +
    `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_763_800_000, model: 'gpt-4o-mini-2024-07-18', choices: [], usage: { prompt_tokens: 12, completion_tokens: STREAM_CHUNKS * 2, total_tokens: 12 + STREAM_CHUNKS * 2 } })}\n\n` +
    'data: [DONE]\n\n',
);

/** The text a client must have assembled when no chunk was lost. */
export const EXPECTED_STREAM_TEXT = Array.from({ length: STREAM_CHUNKS }, (_, i) => `c${i} `).join('');

function stream(res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let i = 0;
  const send = () => {
    if (res.destroyed) return clearInterval(timer);
    res.write(STREAM_EVENTS[i]!);
    i += 1;
    if (i === STREAM_CHUNKS) {
      clearInterval(timer);
      res.end(STREAM_END);
    }
  };
  const timer = setInterval(send, STREAM_GAP_MS);
  send();
}

export function createMockUpstream(): http.Server {
  return http.createServer((req, res) => {
    if (req.method === 'GET' && req.url?.endsWith('/models')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end(MODELS);
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => {
      if (!req.url?.endsWith('/chat/completions')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return void res.end('{"error":{"message":"not found"}}');
      }
      if (/"stream"\s*:\s*true/.test(body)) return stream(res);
      if (req.url.startsWith('/delay20/')) {
        return void setTimeout(() => {
          res.writeHead(200, ANSWER_HEADERS);
          res.end(ANSWER);
        }, DELAY_MS);
      }
      res.writeHead(200, ANSWER_HEADERS);
      res.end(ANSWER);
    });
  });
}

if (require.main === module) {
  const server = createMockUpstream();
  server.keepAliveTimeout = 60_000;
  server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
    console.log(`listening ${(server.address() as { port: number }).port}`);
  });
}
