import type { ProviderFailure, UpstreamRequest } from '../types';

export type VideoSubmit = { model: string; prompt: string; durationSeconds?: number; seed?: number; extra: Record<string, unknown> };

export type VideoStatus =
  | { state: 'running'; progress: number | null }
  | { state: 'succeeded'; durationSeconds: number | null; resolution: string | null; aspectRatio: string | null; mimeType: string; download: string }
  | { state: 'failed'; message: string; code: string | null };

/** One provider's video API as data plus pure transforms; the activities make the calls. */
export interface VideoAdapter {
  submit(request: VideoSubmit): UpstreamRequest;
  parseSubmit(json: unknown): { providerJobId: string };
  status(providerJobId: string): UpstreamRequest;
  parseStatus(json: unknown, providerJobId: string): VideoStatus;
  /** The request that downloads the file: a path under the base URL or an absolute URL. */
  content(providerJobId: string, download: string): UpstreamRequest;
  classifyError(status: number, body: unknown, headers: Record<string, string | string[] | undefined>): ProviderFailure;
}
