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
 * The fewest bytes a second of audio takes in each upload format, so a file of `n` bytes lasts
 * at most `n / floor` seconds whatever its header claims (issue 20: a header is the client's
 * word, and an MP3 whose Xing frame says 1 s can carry 20 minutes). MPEG audio (mp3, mpeg,
 * mpga) cannot go below 8 kbit/s, MPEG-2.5 Layer III's lowest bitrate: 1,000 bytes a second.
 * The others can carry a 6 kbit/s codec (Opus in Ogg or WebM, HE-AAC v2 in MP4/M4A, low-rate
 * codecs in WAV): 750. FLAC and a few WAV codecs can pack silence tighter still; what the
 * provider reports settles those (the hold is an estimate, the settled cost the provider's).
 */
export const MIN_AUDIO_BYTES_PER_SECOND: Readonly<Record<string, number>> = { mp3: 1_000, mpeg: 1_000, mpga: 1_000 };
/** The floor of every other format (see MIN_AUDIO_BYTES_PER_SECOND). */
export const MIN_AUDIO_BYTES_PER_SECOND_OTHER = 750;

/** The longest a file of this size and name can last: its size at the format's floor. */
export function sizeBoundSeconds(bytes: number, filename: string): number {
  const extension = filename.includes('.') ? filename.slice(filename.lastIndexOf('.') + 1).toLowerCase() : '';
  return Math.ceil(bytes / (MIN_AUDIO_BYTES_PER_SECOND[extension] ?? MIN_AUDIO_BYTES_PER_SECOND_OTHER));
}

/**
 * The seconds a transcription holds: the larger of the header's duration and the size bound,
 * never the header alone. `header` is what the header claimed (null when unreadable), for the
 * request log.
 */
export async function reservationSeconds(path: string, filename: string): Promise<{ seconds: number; header: number | null; bound: number }> {
  const header = await audioDurationSeconds(path);
  const { size } = await stat(path);
  const bound = sizeBoundSeconds(size, filename);
  return { seconds: Math.max(header ?? 0, bound), header, bound };
}
