import type { ProviderFailure, UpstreamRequest } from '../types';

/**
 * One render as the gateway asks it: the length is always stated (the job's `duration_seconds`,
 * else the wire's `defaultSeconds`), so what is rendered is what was held and settled; `extra`
 * holds the client's body fields, of which the adapter sends only its `parameters`.
 */
export type VideoSubmit = { model: string; prompt: string; durationSeconds: number; seed?: number; extra: Record<string, unknown> };

export type VideoStatus =
  | { state: 'running'; progress: number | null }
  | { state: 'succeeded'; durationSeconds: number | null; resolution: string | null; aspectRatio: string | null; mimeType: string; download: string }
  | { state: 'failed'; message: string; code: string | null };

/** One provider's video API as data plus pure transforms; the activities make the calls. */
export interface VideoAdapter {
  /** The length the wire renders when none is asked; the gateway asks it explicitly all the same. */
  defaultSeconds: number;
  /**
   * Whether the provider de-duplicates a create by its `Idempotency-Key`: then a submit whose
   * outcome is unknown (a timeout, a connection cut after the body was sent) is sent again to the
   * same provider with the same key. Where it does not, or says nowhere that it does (Veo,
   * OpenAI), such a job ends `failed` (`request_timeout`) with its worst case charged: another
   * submit could start a second render, billed twice. True only with evidence (docs or SDK).
   */
  deduplicatesSubmits: boolean;
  /**
   * The client's body fields this wire takes, sent as given. Each one either leaves the price
   * alone or is `priceVariant`; any other field of the body is not sent (docs/decisions.md,
   * "What a video body may carry").
   */
  parameters: readonly string[];
  /** The parameter whose value picks the list price's variant (a size, a resolution), if any. */
  priceVariant: string | null;
  /** How the render was asked to look, for an answer that does not say (Veo's says nothing). */
  requestedLook(extra: Record<string, unknown>): { resolution: string | null; aspectRatio: string | null };
  submit(request: VideoSubmit): UpstreamRequest;
  parseSubmit(json: unknown): { providerJobId: string };
  status(providerJobId: string): UpstreamRequest;
  parseStatus(json: unknown, providerJobId: string): VideoStatus;
  /** The request that downloads the file: a path under the base URL or an absolute URL. */
  content(providerJobId: string, download: string): UpstreamRequest;
  classifyError(status: number, body: unknown, headers: Record<string, string | string[] | undefined>): ProviderFailure;
}

/** The client's fields a wire takes, as given. */
export function pickParameters(extra: Record<string, unknown>, names: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(names.filter((n) => extra[n] !== undefined).map((n) => [n, extra[n]]));
}
