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

/** Every bucket start of a span, oldest first: a chart shows the empty ones too. */
export function bucketStarts(from: number, to: number, bucket: 'hour' | 'day'): number[] {
  const size = bucket === 'hour' ? 3600 : 86_400;
  const starts: number[] = [];
  for (let t = Math.floor(from / size) * size; t <= to; t += size) starts.push(t);
  return starts;
}

/** A bucket's start as an axis label, in the operator's own time zone (the browser's). */
export function bucketLabel(unix: number, bucket: 'hour' | 'day'): string {
  return new Date(unix * 1000).toLocaleString(undefined, bucket === 'hour' ? { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' } : { month: 'short', day: 'numeric' });
}

/** Chart.js options for a money axis: ticks and tooltips in dollars. */
export const dollarAxis = {
  ticks: { callback: (value: string | number) => usd(Number(value)) },
};
export const dollarTooltip = {
  callbacks: { label: (item: { dataset: { label?: string }; parsed: { y: number | null } }) => `${item.dataset.label ?? ''}: ${usd(item.parsed.y ?? 0)}` },
};
