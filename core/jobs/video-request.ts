import { GatewayError } from '../errors';
import { VIDEO_ADAPTERS } from '../providers/video';

/**
 * Which fields of a `POST /v1/videos` body reach a provider (issue 20). The gateway's own
 * (`model`, `prompt`, `duration_seconds`, `seed`, `webhook`) are read by it. A field that would
 * change what is rendered, and so the bill, behind the hold's back (another length, more than
 * one video) is refused, naming it. Of the rest, each wire takes only its own `parameters`
 * (core/providers/video), each either price-neutral or priced as a variant; anything else is
 * not sent (spec 7 rule 6: an unknown field is not a 400).
 */
const GATEWAY_FIELDS = new Set(['model', 'prompt', 'duration_seconds', 'seed', 'webhook']);

/** Fields that change the bill, each with why it is refused. */
const COST_FIELDS: Record<string, string> = {
  seconds: 'the length of a video is `duration_seconds`',
  durationSeconds: 'the length of a video is `duration_seconds`',
  duration: 'the length of a video is `duration_seconds`',
  n_seconds: 'the length of a video is `duration_seconds`',
  n: 'a job renders one video',
  n_variants: 'a job renders one video',
  sampleCount: 'a job renders one video',
  numberOfVideos: 'a job renders one video',
  number_of_videos: 'a job renders one video',
};

/** Every wire's parameters: what a job may carry for whichever candidate runs it. */
const WIRE_PARAMETERS = new Set(Object.values(VIDEO_ADAPTERS).flatMap((a) => a?.parameters ?? []));

/**
 * The provider parameters of a submit body: refuses a cost field (400, naming it) and a wire
 * parameter that is not a string; answers the wire parameters present, dropping the rest.
 */
export function videoParameters(body: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(body)) {
    if (GATEWAY_FIELDS.has(name) || value === undefined) continue;
    const why = COST_FIELDS[name];
    if (why) throw new GatewayError('invalid_request', `\`${name}\` is not accepted: ${why}.`, { details: { param: name } });
    if (!WIRE_PARAMETERS.has(name)) continue;
    if (typeof value !== 'string' || value.length === 0 || value.length > 2000) {
      throw new GatewayError('invalid_request', `Invalid \`${name}\`: expected a non-empty string.`, { details: { param: name } });
    }
    out[name] = value;
  }
  return out;
}
