/**
 * How a test chooses a failure: directives in the connection's base URL path
 * (`/x/status=429,retry_after=7/openai/v1`) apply to every request through that connection;
 * directives in the last user message (`[sandbox cut_after=3]`) apply to that request. The
 * image and audio endpoints (media.ts) read them from their prompt text instead: JSON `prompt`
 * or `input`, the multipart `prompt` field; there `cut_after` drops a speech answer after n chunks.
 *
 *   status=<code>       answer with this HTTP status in the provider's error format
 *   retry_after=<s>     Retry-After header on that error
 *   times=<n>           fail only the first n requests with these directives (per path)
 *   delay_ms=<ms>       wait this long before answering (for timeouts)
 *   reset               destroy the connection without an answer
 *   cut_after=<n>       on a stream, send n content chunks and then drop the connection
 *   refuse_param=<name> answer 400 when the request carries this parameter
 *   report_cost=<usd>   put a provider-reported cost in the usage (OpenRouter style)
 *   cached=<n>          report n of the prompt tokens as cached
 *   cache_write=<n>     report n of the prompt tokens as written to the prompt cache for 5 minutes (Anthropic)
 *   cache_write_1h=<n>  report n of the prompt tokens as written to the prompt cache for an hour (Anthropic)
 *   reasoning=<n>       report n reasoning tokens within the completion (Anthropic, with
 *                       thinking on: n thinking tokens beyond the shown thinking, in output_tokens)
 *   web_searches=<n>    the model ran n web searches (Anthropic: `usage.server_tool_use`)
 *   tag=<text>          kept on the call's bill line (sandbox/bill.ts): a client's own name for the call
 *   no_usage            report no usage at all (OpenAI wire: no `usage` field, no usage chunk),
 *                       as some compatible servers do
 *   moderation          refuse the request as flagged content
 *   reply=<text>        answer with this text (URL-encoded)
 *   raw_reply=<text>    answer with exactly this text even when structured output was asked
 *                       (a model ignoring the schema); with times=<n>, only the first n requests
 *   tool=<name>         with tools offered, call this one (when offered) rather than the
 *                       first; `tool=none` answers in text though tools are offered, as a
 *                       model that chose not to use one (an agent that always offers its tools)
 *   parallel_tools      with several tools offered, call them all in one turn (unless the
 *                       request turned parallel calls off: OpenAI `parallel_tool_calls`,
 *                       Anthropic `tool_choice.disable_parallel_tool_use`)
 *   words=<n>           answer with n numbered words (`w000001xxx... `), one stream chunk each
 *   word_bytes=<b>      with `words`, each word is b bytes long (default 16)
 *   multiline_data      on a stream, each event's JSON is indented over several lines, each
 *                       line its own `data:` field (SSE joins them with newlines; a client
 *                       that frames a relayed event as one line would break)
 *   render_ms=<ms>      a video takes this long to render (default 1500)
 *   video_fail          the video render fails
 *   never_finish        the video render never finishes
 *   no_progress         the provider reports no progress while rendering
 *   content_delay_ms=<ms> the finished video's download starts this late
 *   submit_delay_ms=<ms> a video submit is answered (and the render accepted) this late
 *   submit_hang         a video submit is accepted (the render starts) and never answered, as
 *                       when the connection is cut after the provider took it; a repeat with the
 *                       same Idempotency-Key is answered with that render
 *   check_status=<code> a video's status checks answer this HTTP status (e.g. 404 not found;
 *                       with times=<n>, only the first n checks)
 *   download_uri=<url>  a finished Veo operation points its download at this URL (URL-encoded)
 *   batch_refuse        a provider batch's create (batches.ts) is refused (400)
 *   batch_fail          a provider batch (batches.ts) fails
 *   batch_expire        a provider batch's window runs out after half its requests
 *   batch_item_ms=<ms>  each request of a provider batch takes this long (a slow batch)
 *   batch_check_status=<code> a provider batch's status checks answer this HTTP status (OpenAI)
 */
export type Directives = {
  status?: number;
  retryAfter?: string;
  times?: number;
  delayMs?: number;
  reset?: boolean;
  cutAfter?: number;
  refuseParam?: string;
  reportCost?: number;
  cached?: number;
  cacheWrite?: number;
  cacheWrite1h?: number;
  reasoning?: number;
  webSearches?: number;
  tag?: string;
  noUsage?: boolean;
  moderation?: boolean;
  reply?: string;
  rawReply?: string;
  parallelTools?: boolean;
  tool?: string;
  words?: number;
  wordBytes?: number;
  multilineData?: boolean;
  renderMs?: number;
  videoFail?: boolean;
  neverFinish?: boolean;
  noProgress?: boolean;
  contentDelayMs?: number;
  submitDelayMs?: number;
  submitHang?: boolean;
  submitGarbled?: boolean;
  checkStatus?: number;
  downloadUri?: string;
  batchRefuse?: boolean;
  batchFail?: boolean;
  batchExpire?: boolean;
  batchItemMs?: number;
  batchCheckStatus?: number;
};

export function parseDirectives(text: string): Directives {
  const d: Directives = {};
  for (const part of text.split(/[,\s]+/).filter(Boolean)) {
    const [name, raw = ''] = part.split('=');
    const value = decodeURIComponent(raw);
    switch (name) {
      case 'status': d.status = Number(value); break;
      case 'retry_after': d.retryAfter = value; break;
      case 'times': d.times = Number(value); break;
      case 'delay_ms': d.delayMs = Number(value); break;
      case 'reset': d.reset = true; break;
      case 'raw_reply': d.rawReply = value; break;
      case 'cut_after': d.cutAfter = Number(value); break;
      case 'refuse_param': d.refuseParam = value; break;
      case 'report_cost': d.reportCost = Number(value); break;
      case 'cached': d.cached = Number(value); break;
      case 'cache_write': d.cacheWrite = Number(value); break;
      case 'cache_write_1h': d.cacheWrite1h = Number(value); break;
      case 'reasoning': d.reasoning = Number(value); break;
      case 'web_searches': d.webSearches = Number(value); break;
      case 'tag': d.tag = value; break;
      case 'no_usage': d.noUsage = true; break;
      case 'moderation': d.moderation = true; break;
      case 'reply': d.reply = value; break;
      case 'parallel_tools': d.parallelTools = true; break;
      case 'tool': d.tool = value; break;
      case 'words': d.words = Number(value); break;
      case 'word_bytes': d.wordBytes = Number(value); break;
      case 'multiline_data': d.multilineData = true; break;
      case 'render_ms': d.renderMs = Number(value); break;
      case 'video_fail': d.videoFail = true; break;
      case 'never_finish': d.neverFinish = true; break;
      case 'no_progress': d.noProgress = true; break;
      case 'content_delay_ms': d.contentDelayMs = Number(value); break;
      case 'submit_delay_ms': d.submitDelayMs = Number(value); break;
      case 'submit_hang': d.submitHang = true; break;
      case 'submit_garbled': d.submitGarbled = true; break;
      case 'check_status': d.checkStatus = Number(value); break;
      case 'download_uri': d.downloadUri = value; break;
      case 'batch_refuse': d.batchRefuse = true; break;
      case 'batch_fail': d.batchFail = true; break;
      case 'batch_expire': d.batchExpire = true; break;
      case 'batch_item_ms': d.batchItemMs = Number(value); break;
      case 'batch_check_status': d.batchCheckStatus = Number(value); break;
      default: break;
    }
  }
  return d;
}

/** The reply of `words=<n>`: n words `w<index>` padded to `bytes`, each followed by a space. */
export function numberedWords(n: number, bytes = 16): string {
  return Array.from({ length: n }, (_, i) => `w${String(i).padStart(7, '0')}`.padEnd(bytes - 1, 'x')).join(' ');
}

/** `[sandbox ...]` inside a message's text. */
export function directivesInText(text: string): string {
  return [...text.matchAll(/\[sandbox ([^\]]*)\]/g)].map((m) => m[1]).join(',');
}
