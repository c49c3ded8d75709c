import { stat } from 'node:fs/promises';
import { parseFile } from 'music-metadata';

/**
 * The length of an uploaded audio file, read from its header by `music-metadata` (MP3, WAV,
 * FLAC, Ogg/Opus, M4A/MP4, WebM and the other formats it parses). Version 7 is the package's
 * last CommonJS release: from 8 it ships only as ES modules, which Jest cannot load on Node 20
 * (it needs Node 24.9 for `require(esm)`), and every test here runs under Jest.
 *
 * MP3s without a Xing/VBRI header are measured by counting their frames (`duration: true`),
 * which reads the whole file: uploads are at most 26 MB (spec 8), so that stays cheap.
 */
export async function audioDurationSeconds(path: string): Promise<number | null> {
  try {
    const { format } = await parseFile(path, { duration: true, skipCovers: true });
    const seconds = format.duration;
    return typeof seconds === 'number' && Number.isFinite(seconds) && seconds > 0 ? seconds : null;
  } catch {
    // An unknown or damaged format: the caller falls back to the size estimate.
    return null;
  }
}

/**
 * The fewest bytes a second of audio can take, so a file of `n` bytes lasts at most `n / floor`
 * seconds whatever its header claims (issue 20: a header is the client's word, and an MP3 whose
 * Xing frame says 1 s can carry 20 minutes). 750 bytes is 6 kbit/s, what Opus (in Ogg or WebM)
 * and HE-AAC v2 (in MP4/M4A) can go down to; MPEG audio cannot go below 8 kbit/s, but the file's
 * name is the client's word too, and `music-metadata` picks its parser by that name, so one
 * floor holds for every upload. FLAC and a few WAV codecs can pack silence tighter still; what
 * the provider reports settles those (the hold is an estimate, the settled cost the provider's).
 */
export const MIN_AUDIO_BYTES_PER_SECOND = 750;

/** The longest a file of this size can last: its size at the floor. */
export function sizeBoundSeconds(bytes: number): number {
  return Math.ceil(bytes / MIN_AUDIO_BYTES_PER_SECOND);
}

/**
 * The seconds a transcription holds: the larger of the header's duration and the size bound,
 * never the header alone. `header` is what the header claimed (null when unreadable), for the
 * request log.
 */
export async function reservationSeconds(path: string): Promise<{ seconds: number; header: number | null; bound: number }> {
  const header = await audioDurationSeconds(path);
  const { size } = await stat(path);
  const bound = sizeBoundSeconds(size);
  return { seconds: Math.max(header ?? 0, bound), header, bound };
}
