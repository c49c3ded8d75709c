/**
 * A deliberately non-deterministic change to `videoJob`: a timer before everything it did.
 * The replay test bundles this in place of the real workflows and expects the recorded
 * histories to refuse it.
 */
import { sleep } from '@temporalio/workflow';
import type { VideoJobInput } from '../../workflows/definitions';
import { videoJob as recorded } from '../../workflows/video-job';

export async function videoJob(input: VideoJobInput) {
  await sleep('1 second');
  return recorded(input);
}
