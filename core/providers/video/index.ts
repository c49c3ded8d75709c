import type { ProviderKind } from '../kinds';
import { googleVideoAdapter } from './google';
import { openAiVideoAdapter } from './openai';
import type { VideoAdapter } from './types';

/** The kinds that render video, and how. Other kinds are skipped when planning a video job. */
export const VIDEO_ADAPTERS: Partial<Record<ProviderKind, VideoAdapter>> = {
  openai: openAiVideoAdapter,
  azure_openai: openAiVideoAdapter,
  google: googleVideoAdapter,
};
