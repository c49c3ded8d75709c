import type Router from '@koa/router';
import type { GatewayState } from '../context';
import { multipartBody } from '../middleware/multipart';
import { audioSpeech, audioTranscriptions, TRANSCRIPTION_FIELDS, TRANSCRIPTION_FILES } from './media-audio';
import { EDIT_FIELDS, EDIT_FILES, imageEdits, imageGenerations } from './media-images';
import type { GatewayServices } from './services';

const MB = 1_000_000;
/**
 * One file inside a multipart body (spec 7: over it is 400 invalid_request_error naming the
 * field): OpenAI's own limits, 50 MB an image to edit and 25 MB of audio, each under its
 * endpoint's whole-body limit (51 and 26 MB, spec 8) so a lone file over it meets this first.
 */
export const EDIT_MAX_FILE_BYTES = 50 * MB;
export const TRANSCRIPTION_MAX_FILE_BYTES = 25 * MB;

/** The image and audio endpoints (issue 14). Multipart ones spool their body under GW_DATA_DIR. */
export function mediaRoutes(router: Router<GatewayState>, services: GatewayServices): void {
  router.post('/images/generations', imageGenerations(services));
  router.post('/images/edits', multipartBody({ spoolDir: services.spoolDir, maxFileBytes: EDIT_MAX_FILE_BYTES, files: EDIT_FILES, fields: EDIT_FIELDS }), imageEdits(services));
  router.post('/audio/transcriptions', multipartBody({ spoolDir: services.spoolDir, maxFileBytes: TRANSCRIPTION_MAX_FILE_BYTES, files: TRANSCRIPTION_FILES, fields: TRANSCRIPTION_FIELDS }), audioTranscriptions(services));
  router.post('/audio/speech', audioSpeech(services));
}
