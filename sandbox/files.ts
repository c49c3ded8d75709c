import { crc32, deflateSync } from 'node:zlib';

/**
 * Real, small, valid media files for the media endpoints, and the readers the sandbox uses on
 * uploads: PNG (RGBA, one colour), WAV and raw PCM (24 kHz, 16-bit, mono, a quiet tone), MP3
 * (MPEG-1 Layer III, 48 kHz, 32 kbit/s, mono, silent frames after a LAME-style `Info` frame
 * that carries the frame count). Durations are exact so tests can compute them.
 */

// ---------------------------------------------------------------- PNG

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

const pngCache = new Map<string, Buffer>();

/** A width x height RGBA PNG of one colour (8-bit, colour type 6), cached per size and colour. */
export function png(width: number, height: number, rgba: [number, number, number, number] = [64, 128, 192, 255]): Buffer {
  const key = `${width}x${height}:${rgba.join(',')}`;
  const cached = pngCache.get(key);
  if (cached) return cached;
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 6; // RGBA
  // compression 0, filter 0, interlace 0
  const row = Buffer.alloc(1 + width * 4);
  for (let x = 0; x < width; x += 1) row.set(rgba, 1 + x * 4);
  const raw = Buffer.alloc(row.length * height);
  for (let y = 0; y < height; y += 1) row.copy(raw, y * row.length);
  const file = Buffer.concat([PNG_SIGNATURE, pngChunk('IHDR', ihdr), pngChunk('IDAT', deflateSync(raw)), pngChunk('IEND', Buffer.alloc(0))]);
  pngCache.set(key, file);
  return file;
}

/** A colour per image index, so the n images of one answer differ. */
export function colorFor(index: number): [number, number, number, number] {
  return [(64 + index * 40) % 256, (128 + index * 70) % 256, (192 + index * 25) % 256, 255];
}

export type PngInfo = { width: number; height: number; colorType: number; bitDepth: number };

/** The IHDR of a PNG, or null when the bytes are not a PNG (signature, IHDR first, CRC checked). */
export function pngInfo(bytes: Buffer): PngInfo | null {
  if (bytes.length < 33 || !bytes.subarray(0, 8).equals(PNG_SIGNATURE) || bytes.toString('latin1', 12, 16) !== 'IHDR') return null;
  if (bytes.readUInt32BE(8) !== 13 || (crc32(bytes.subarray(12, 29)) >>> 0) !== bytes.readUInt32BE(29)) return null;
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20), bitDepth: bytes[24]!, colorType: bytes[25]! };
}

/** The image kind by magic bytes: png, jpeg, webp, or null. */
export function imageKind(bytes: Buffer): 'png' | 'jpeg' | 'webp' | null {
  if (bytes.subarray(0, 8).equals(PNG_SIGNATURE)) return 'png';
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'jpeg';
  if (bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return 'webp';
  return null;
}

// ---------------------------------------------------------------- audio

/** What OpenAI's speech answers are: 24 kHz mono 16-bit. */
export const PCM_RATE = 24000;

/** Speech lasts 50 ms per input character, divided by `speed`, in whole samples at 24 kHz. */
export function speechSamples(input: string, speed = 1): number {
  return Math.max(1, Math.round((PCM_RATE * input.length * 0.05) / speed));
}

/** Raw PCM: signed 16-bit little-endian mono at 24 kHz, a quiet 440 Hz tone. */
export function pcm(samples: number): Buffer {
  const out = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i += 1) out.writeInt16LE(Math.round(1000 * Math.sin((2 * Math.PI * 440 * i) / PCM_RATE)), i * 2);
  return out;
}

/** A RIFF/WAVE file around `pcm(samples)`: PCM format 1, 24 kHz, mono, 16-bit. */
export function wav(samples: number): Buffer {
  const data = pcm(samples);
  const head = Buffer.alloc(44);
  head.write('RIFF', 0, 'latin1');
  head.writeUInt32LE(36 + data.length, 4);
  head.write('WAVE', 8, 'latin1');
  head.write('fmt ', 12, 'latin1');
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(1, 20); // PCM
  head.writeUInt16LE(1, 22); // mono
  head.writeUInt32LE(PCM_RATE, 24);
  head.writeUInt32LE(PCM_RATE * 2, 28); // byte rate
  head.writeUInt16LE(2, 32); // block align
  head.writeUInt16LE(16, 34); // bits per sample
  head.write('data', 36, 'latin1');
  head.writeUInt32LE(data.length, 40);
  return Buffer.concat([head, data]);
}

/** MPEG-1 Layer III, 48 kHz, 32 kbit/s, mono, no CRC: 144 * 32000 / 48000 = 96 bytes a frame, 1152 samples. */
export const MP3_RATE = 48000;
export const MP3_FRAME_BYTES = 96;
export const MP3_FRAME_SAMPLES = 1152;
/** sync (11 bits) | MPEG-1 (11) | Layer III (01) | no CRC (1); bitrate 0001 (32k) | 48 kHz (01) | no padding | private 0; mono (11) | ext 00 | copyright 0 | original 1 | emphasis 00. */
const MP3_HEADER = Buffer.from([0xff, 0xfb, 0x14, 0xc4]);
/** Side information of a mono MPEG-1 frame: 17 bytes; all zero means no main data, i.e. silence. */
const MP3_SIDE_INFO = 17;

/** Audio frames (not counting the Info frame) for a duration in samples at 24 kHz. */
export function mp3Frames(samples24k: number): number {
  return Math.max(1, Math.ceil((samples24k * 2) / MP3_FRAME_SAMPLES));
}

/** An MP3 of `frames` silent frames, led by an `Info` (CBR Xing) frame giving the frame and byte count. */
export function mp3(frames: number): Buffer {
  const frame = () => {
    const f = Buffer.alloc(MP3_FRAME_BYTES);
    MP3_HEADER.copy(f, 0);
    return f;
  };
  const info = frame();
  const at = 4 + MP3_SIDE_INFO;
  info.write('Info', at, 'latin1');
  info.writeUInt32BE(0x3, at + 4); // frames and bytes fields present
  info.writeUInt32BE(frames, at + 8);
  info.writeUInt32BE((frames + 1) * MP3_FRAME_BYTES, at + 12);
  return Buffer.concat([info, ...Array.from({ length: frames }, frame)]);
}

/**
 * Speech in a format OpenAI offers. mp3, wav and pcm are complete valid files; opus, aac and
 * flac start with their format's signature (Ogg page, ADTS header, `fLaC`) and are otherwise
 * silence-sized filler, enough for a content-type and magic-byte check, not for a decoder.
 */
export function speechFile(format: string, samples: number): Buffer {
  switch (format) {
    case 'wav': return wav(samples);
    case 'pcm': return pcm(samples);
    case 'opus': return Buffer.concat([Buffer.from('OggS\0\x02', 'latin1'), Buffer.alloc(Math.ceil(samples / 10))]);
    case 'aac': return Buffer.concat([Buffer.from([0xff, 0xf1, 0x50, 0x80]), Buffer.alloc(Math.ceil(samples / 10))]);
    case 'flac': return Buffer.concat([Buffer.from('fLaC', 'latin1'), Buffer.alloc(Math.ceil(samples / 10))]);
    default: return mp3(mp3Frames(samples));
  }
}

export const SPEECH_CONTENT_TYPES: Record<string, string> = {
  mp3: 'audio/mpeg', wav: 'audio/wav', opus: 'audio/opus', aac: 'audio/aac', flac: 'audio/flac', pcm: 'audio/pcm',
};

const MP3_BITRATES_V1_L3 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const MP3_RATES_V1 = [44100, 48000, 32000];

/**
 * An MP3's duration in seconds as a decoder hears it: the audio frames walked (MPEG-1 Layer
 * III only), or null. A leading Info/Xing frame is skipped, not believed: its frame count is
 * the file's claim, and a transcription decodes every frame whatever the header says.
 */
function mp3Seconds(bytes: Buffer): number | null {
  let at = 0;
  if (bytes.toString('latin1', 0, 3) === 'ID3' && bytes.length >= 10) {
    at = 10 + ((bytes[6]! & 0x7f) << 21 | (bytes[7]! & 0x7f) << 14 | (bytes[8]! & 0x7f) << 7 | (bytes[9]! & 0x7f));
  }
  let frames = 0;
  let skippedHeader = false;
  let rate = 0;
  while (at + 4 <= bytes.length) {
    if (bytes[at] !== 0xff || (bytes[at + 1]! & 0xfe) !== 0xfa) break;
    const bitrate = MP3_BITRATES_V1_L3[bytes[at + 2]! >> 4];
    const sampleRate = MP3_RATES_V1[(bytes[at + 2]! >> 2) & 3];
    if (!bitrate || !sampleRate) break;
    rate = sampleRate;
    const mono = (bytes[at + 3]! >> 6) === 3;
    const tag = at + 4 + (mono ? 17 : 32);
    const header = frames === 0 && !skippedHeader && ['Xing', 'Info'].includes(bytes.toString('latin1', tag, tag + 4));
    if (header) skippedHeader = true;
    else frames += 1;
    at += Math.floor((144 * bitrate * 1000) / sampleRate) + ((bytes[at + 2]! >> 1) & 1);
  }
  return frames > 0 ? (frames * MP3_FRAME_SAMPLES) / rate : null;
}

/** A WAV's duration in seconds from its `fmt ` byte rate and `data` size, or null. */
function wavSeconds(bytes: Buffer): number | null {
  if (bytes.toString('latin1', 0, 4) !== 'RIFF' || bytes.toString('latin1', 8, 12) !== 'WAVE') return null;
  let byteRate = 0;
  for (let at = 12; at + 8 <= bytes.length;) {
    const id = bytes.toString('latin1', at, at + 4);
    const size = bytes.readUInt32LE(at + 4);
    if (id === 'fmt ' && at + 16 <= bytes.length) byteRate = bytes.readUInt32LE(at + 16);
    if (id === 'data') return byteRate ? Math.min(size, bytes.length - at - 8) / byteRate : null;
    at += 8 + size + (size & 1);
  }
  return null;
}

/** An uploaded audio file's duration in seconds as decoded: exact for WAV and MP3, else estimated at 16 kB a second (128 kbit/s). */
export function audioSeconds(bytes: Buffer): number {
  return wavSeconds(bytes) ?? mp3Seconds(bytes) ?? bytes.length / 16000;
}
