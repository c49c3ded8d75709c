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
 * The bitrate the size fallback assumes: 16 kbit/s (2,000 bytes a second), below what speech
 * is normally sent at (MP3 and M4A voice run 32 to 128 kbit/s, Opus voice 16 to 32), so a file
 * whose header cannot be read is held as longer than it can plausibly be. A 26 MB upload is
 * held as 13,000 seconds (3.6 hours: $1.30 at whisper-1's $0.006 a minute).
 */
export const FALLBACK_BYTES_PER_SECOND = 2_000;

/** The seconds to reserve for a file whose header gives no duration: its size at the fallback bitrate. */
export function fallbackDurationSeconds(bytes: number): number {
  return Math.ceil(bytes / FALLBACK_BYTES_PER_SECOND);
}

/**
 * The seconds a transcription reserves: the header's duration, else the size fallback. `source`
 * says which, for the request log.
 */
export async function reservationSeconds(path: string): Promise<{ seconds: number; source: 'header' | 'size' }> {
  const seconds = await audioDurationSeconds(path);
  if (seconds !== null) return { seconds, source: 'header' };
  const { size } = await stat(path);
  return { seconds: fallbackDurationSeconds(size), source: 'size' };
}
