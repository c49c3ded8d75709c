/** Shared display formats. */
export const usd = (n: number | null | undefined) => (n === null || n === undefined ? '—' : `$${n < 0.01 && n > 0 ? n.toPrecision(3) : n.toFixed(2)}`);
export const when = (unix: number | null | undefined) => (unix ? new Date(unix * 1000).toISOString().replace('T', ' ').slice(0, 19) + ' UTC' : '—');
export const count = (n: number | null | undefined) => (n === null || n === undefined ? '—' : n.toLocaleString('en-US'));

/** The client protocol a request came in by, from its request-log endpoint. */
const PROTOCOLS: Record<string, string> = {
  'chat.completions': 'OpenAI Chat Completions',
  messages: 'Anthropic Messages',
  responses: 'OpenAI Responses',
  embeddings: 'OpenAI Embeddings',
};
export const protocolOf = (endpoint: string) => PROTOCOLS[endpoint] ?? endpoint;
