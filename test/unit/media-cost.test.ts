import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { calcPrice } from '@pydantic/genai-prices';
import { audioDurationSeconds, reservationSeconds, sizeBoundSeconds } from '../../core/pricing/audio-duration';
import {
  imageCost, imageWorstCase, mediaListRow, mediaPrice, speechCost, speechWorstCase, transcriptionCost, transcriptionWorstCase,
  type MediaPriceEntry,
} from '../../core/pricing/media-cost';
import table from '../../core/pricing/media-list-prices.json';

const none: MediaPriceEntry[] = [];
const unit = (model: string, provider: string | null, value: number): MediaPriceEntry => ({ model, provider, unit: value });

describe('list prices: the shipped table', () => {
  test('dall-e-2 and dall-e-3 by size and quality, times n', () => {
    expect(imageCost({ kind: 'openai', model: 'dall-e-3', prices: none, n: 1 })).toEqual({ cost: 0.04, source: 'list' }); // default 1024x1024 standard
    expect(imageCost({ kind: 'openai', model: 'dall-e-3', prices: none, n: 2, size: '1024x1024', quality: 'standard' })).toEqual({ cost: 0.08, source: 'list' });
    expect(imageCost({ kind: 'openai', model: 'dall-e-3', prices: none, n: 3, size: '1792x1024', quality: 'hd' })).toEqual({ cost: 0.36, source: 'list' });
    expect(imageCost({ kind: 'openai', model: 'dall-e-3', prices: none, n: 1, size: '1024x1792' })).toEqual({ cost: 0.08, source: 'list' }); // standard by default
    expect(imageCost({ kind: 'openai', model: 'dall-e-2', prices: none, n: 4, size: '512x512' })).toEqual({ cost: 0.072, source: 'list' });
    expect(imageCost({ kind: 'azure_openai', model: 'dall-e-2', prices: none, n: 10, size: '256x256' })).toEqual({ cost: 0.16, source: 'list' });
    expect(mediaPrice('openai', 'dall-e-3', { media: 'image', size: '1024x1024', quality: 'hd' }, none)).toEqual({ unitPrice: 0.08, unit: 'image', source: 'list', basis: 'table' });
  });

  test('Imagen per image on google, preview aliases included', () => {
    expect(imageCost({ kind: 'google', model: 'imagen-3.0-generate-002', prices: none, n: 1 })).toEqual({ cost: 0.03, source: 'list' });
    expect(imageCost({ kind: 'google', model: 'imagen-4.0-generate-001', prices: none, n: 3 })).toEqual({ cost: 0.12, source: 'list' });
    expect(imageCost({ kind: 'google', model: 'imagen-4.0-ultra-generate-001', prices: none, n: 2 })).toEqual({ cost: 0.12, source: 'list' });
    expect(imageCost({ kind: 'google', model: 'imagen-4.0-fast-generate-001', prices: none, n: 4 })).toEqual({ cost: 0.08, source: 'list' });
    expect(imageCost({ kind: 'google', model: 'imagen-4.0-generate-preview-06-06', prices: none, n: 1 })).toEqual({ cost: 0.04, source: 'list' });
    expect(imageCost({ kind: 'google', model: 'google/imagen-4.0-generate-001', prices: none, n: 1 })).toEqual({ cost: 0.04, source: 'list' });
  });

  test('tts-1, tts-1-hd per character; gpt-4o-mini-tts at its per-minute estimate', () => {
    expect(speechCost({ kind: 'openai', model: 'tts-1', prices: none, characters: 1000 })).toEqual({ cost: 0.015, source: 'list' });
    expect(speechCost({ kind: 'openai', model: 'tts-1-hd', prices: none, characters: 4096 })).toEqual({ cost: 0.12288, source: 'list' });
    // $0.015 a minute over 600 characters a minute: $0.000025 a character.
    expect(speechCost({ kind: 'openai', model: 'gpt-4o-mini-tts', prices: none, characters: 1000 })).toEqual({ cost: 0.025, source: 'list' });
    expect(speechWorstCase({ kind: 'openai', model: 'tts-1', prices: none, characters: 4096 })).toEqual({ cost: 0.06144, source: 'list' });
    expect(mediaPrice('openai', 'tts-1-hd', { media: 'speech' }, none)).toEqual({ unitPrice: 0.00003, unit: 'character', source: 'list', basis: 'table' });
  });

  test('gpt-4o-transcribe and gpt-4o-mini-transcribe at their per-minute estimates without token usage', () => {
    expect(transcriptionCost({ kind: 'openai', model: 'gpt-4o-transcribe', prices: none, seconds: 90 })).toEqual({ cost: 0.009, source: 'list' });
    expect(transcriptionCost({ kind: 'openai', model: 'gpt-4o-mini-transcribe', prices: none, seconds: 120 })).toEqual({ cost: 0.006, source: 'list' });
    expect(transcriptionWorstCase({ kind: 'openai', model: 'gpt-4o-transcribe', prices: none, seconds: 600 })).toEqual({ cost: 0.06, source: 'list' });
    expect(mediaPrice('openai', 'gpt-4o-transcribe', { media: 'transcription' }, none)).toEqual({ unitPrice: 0.0001, unit: 'second', source: 'list', basis: 'table' });
  });
});

describe('list prices: genai-prices first where it prices the model', () => {
  test('whisper-1 by the second ($0.36 an hour)', () => {
    expect(mediaPrice('openai', 'whisper-1', { media: 'transcription' }, none)).toEqual({ unitPrice: 0.0001, unit: 'second', source: 'list', basis: 'genai-prices' });
    expect(transcriptionCost({ kind: 'openai', model: 'whisper-1', prices: none, seconds: 90 })).toEqual({ cost: 0.009, source: 'list' });
    // whisper-1 reports `{type: 'duration', seconds}`: the provider's count wins over the header's.
    expect(transcriptionCost({ kind: 'openai', model: 'whisper-1', prices: none, seconds: 90, usage: { type: 'duration', seconds: 30 } })).toEqual({ cost: 0.003, source: 'list' });
    expect(transcriptionWorstCase({ kind: 'azure_openai', model: 'whisper-1', prices: none, seconds: 3600 })).toEqual({ cost: 0.36, source: 'list' });
  });

  test('gpt-image-1 per image: output tokens by size and quality at $40 a million', () => {
    expect(mediaPrice('openai', 'gpt-image-1', { media: 'image', size: '1024x1024', quality: 'high' }, none)).toEqual({ unitPrice: 0.1664, unit: 'image', source: 'list', basis: 'genai-prices' });
    expect(imageCost({ kind: 'openai', model: 'gpt-image-1', prices: none, n: 2, size: '1024x1024', quality: 'high' })).toEqual({ cost: 0.3328, source: 'list' }); // 2 x 4160 x $40/M
    expect(imageCost({ kind: 'openai', model: 'gpt-image-1', prices: none, n: 1, size: '1536x1024', quality: 'medium' })).toEqual({ cost: 0.06272, source: 'list' }); // 1568 tokens
    expect(imageCost({ kind: 'openai', model: 'gpt-image-1', prices: none, n: 3, size: '1024x1024', quality: 'low' })).toEqual({ cost: 0.03264, source: 'list' }); // 3 x 272
    // `auto` (the default) is held at the dearest: high, 1024x1536, 6240 tokens.
    expect(imageCost({ kind: 'openai', model: 'gpt-image-1', prices: none, n: 1 })).toEqual({ cost: 0.2496, source: 'list' });
    expect(imageCost({ kind: 'openai', model: 'gpt-image-1', prices: none, n: 1, size: 'auto', quality: 'low' })).toEqual({ cost: 0.01632, source: 'list' });
  });

  test('gpt-image-1 by its token usage: text in $5, image in $10, out $40 a million', () => {
    const usage = { input_tokens: 160, input_tokens_details: { text_tokens: 100, image_tokens: 60 }, output_tokens: 4160, total_tokens: 4320 };
    // 100 x 5 + 60 x 10 + 4160 x 40 = 167,500 micro-dollars per million
    expect(imageCost({ kind: 'openai', model: 'gpt-image-1', prices: none, n: 1, size: '1024x1024', quality: 'high', usage })).toEqual({ cost: 0.1675, source: 'list' });
  });

  test('gpt-4o-transcribe and gpt-4o-mini-tts by token usage', () => {
    const usage = { input_tokens: 1000, input_token_details: { text_tokens: 100, audio_tokens: 900 }, output_tokens: 50, total_tokens: 1050 };
    // 100 x 2.5 + 900 x 6 + 50 x 10 = 6,150 per million
    expect(transcriptionCost({ kind: 'openai', model: 'gpt-4o-transcribe', prices: none, seconds: 90, usage })).toEqual({ cost: 0.00615, source: 'list' });
    // 100 x 1.25 + 900 x 3 + 50 x 5 = 3,075 per million
    expect(transcriptionCost({ kind: 'openai', model: 'gpt-4o-mini-transcribe', prices: none, seconds: 90, usage })).toEqual({ cost: 0.003075, source: 'list' });
    // 250 x 0.6 + 1250 x 12 = 15,150 per million
    expect(speechCost({ kind: 'openai', model: 'gpt-4o-mini-tts', prices: none, characters: 1000, usage: { input_tokens: 250, output_tokens: 1250 } })).toEqual({ cost: 0.01515, source: 'list' });
  });

  test("the table's token prices agree with genai-prices wherever both price a model", () => {
    for (const rows of [table.images, table.speech, table.transcription]) {
      for (const row of rows as Array<{ model: string; token_prices?: Record<string, number> }>) {
        if (!row.token_prices) continue;
        const perMillion = (usage: Record<string, number>) => calcPrice(usage, row.model, { providerId: 'openai' })!.total_price;
        expect(perMillion({ input_tokens: 1e6, output_tokens: 0 })).toBeCloseTo(row.token_prices.input_per_million!, 9);
        expect(perMillion({ input_tokens: 0, output_tokens: 1e6 })).toBeCloseTo(row.token_prices.output_per_million!, 9);
        if (row.token_prices.input_audio_per_million) expect(perMillion({ input_tokens: 1e6, input_audio_tokens: 1e6, output_tokens: 0 })).toBeCloseTo(row.token_prices.input_audio_per_million, 9);
        if (row.token_prices.input_image_per_million) expect(perMillion({ input_tokens: 1e6, input_image_tokens: 1e6, output_tokens: 0 })).toBeCloseTo(row.token_prices.input_image_per_million, 9);
      }
    }
    const whisper = table.transcription.find((r) => r.model === 'whisper-1')!;
    expect(calcPrice({ audio_seconds: 60, input_audio_seconds: 60 }, 'whisper-1', { providerId: 'openai' })!.total_price).toBeCloseTo(whisper.usd_per_unit * 60, 12);
  });
});

describe('custom rates (model_prices.unit) beat list prices', () => {
  test('custom for any provider, custom_provider for this one', () => {
    expect(imageCost({ kind: 'openai', model: 'dall-e-3', prices: [unit('dall-e-3', null, 0.05)], n: 2 })).toEqual({ cost: 0.1, source: 'custom' });
    const both = [unit('dall-e-3', null, 0.05), unit('dall-e-3', 'openai', 0.035)];
    expect(imageCost({ kind: 'openai', model: 'dall-e-3', prices: both, n: 2, quality: 'hd' })).toEqual({ cost: 0.07, source: 'custom_provider' });
    // Another provider's rate does not apply: the any-provider one does.
    expect(imageCost({ kind: 'azure_openai', model: 'dall-e-3', prices: both, n: 2 })).toEqual({ cost: 0.1, source: 'custom' });
    expect(mediaPrice('openai', 'dall-e-3', { media: 'image' }, both)).toEqual({ unitPrice: 0.035, unit: 'image', source: 'custom_provider', basis: 'custom' });
  });

  test('per second for transcription, per character for speech', () => {
    expect(transcriptionCost({ kind: 'openai', model: 'whisper-1', prices: [unit('whisper-1', 'openai', 0.00008)], seconds: 90 })).toEqual({ cost: 0.0072, source: 'custom_provider' });
    expect(transcriptionWorstCase({ kind: 'openai', model: 'gpt-4o-transcribe', prices: [unit('gpt-4o-transcribe', null, 0.00009)], seconds: 100 })).toEqual({ cost: 0.009, source: 'custom' });
    expect(speechCost({ kind: 'openai', model: 'tts-1', prices: [unit('tts-1', null, 0.00001)], characters: 2500 })).toEqual({ cost: 0.025, source: 'custom' });
    expect(speechWorstCase({ kind: 'openai', model: 'gpt-4o-mini-tts', prices: [unit('gpt-4o-mini-tts', 'openai', 0.00002)], characters: 1000 })).toEqual({ cost: 0.02, source: 'custom_provider' });
  });

  test('a per-unit rate beats token usage; token rates price token usage', () => {
    const usage = { input_tokens: 160, input_tokens_details: { text_tokens: 100, image_tokens: 60 }, output_tokens: 4160 };
    expect(imageCost({ kind: 'openai', model: 'gpt-image-1', prices: [unit('gpt-image-1', null, 0.1)], n: 2, usage })).toEqual({ cost: 0.2, source: 'custom' });
    const tokenRates: MediaPriceEntry = { model: 'gpt-4o-transcribe', provider: 'openai', unit: null, inputPerMillion: 2, outputPerMillion: 8 };
    const transcribed = { input_tokens: 1000, input_token_details: { audio_tokens: 900, text_tokens: 100 }, output_tokens: 50 };
    // 1000 x 2 + 50 x 8 = 2,400 per million
    expect(transcriptionCost({ kind: 'openai', model: 'gpt-4o-transcribe', prices: [tokenRates], seconds: 60, usage: transcribed })).toEqual({ cost: 0.0024, source: 'custom_provider' });
    // Without token usage a token-only rate cannot price it: the list estimate does.
    expect(transcriptionCost({ kind: 'openai', model: 'gpt-4o-transcribe', prices: [tokenRates], seconds: 60 })).toEqual({ cost: 0.006, source: 'list' });
  });

  test('a model no list prices is priced by a custom rate, by any of its names', () => {
    expect(imageCost({ kind: 'together', model: 'black-forest-labs/FLUX.1-schnell', prices: [unit('black-forest-labs/FLUX.1-schnell', 'together', 0.003)], n: 4 })).toEqual({ cost: 0.012, source: 'custom_provider' });
    expect(imageCost({ kind: 'openai', model: 'dall-e-3', modelId: 'openai/dall-e-3', prices: [unit('openai/dall-e-3', null, 0.03)], n: 1 })).toEqual({ cost: 0.03, source: 'custom' });
    expect(speechCost({ kind: 'azure_openai', model: 'my-tts-deployment', modelId: 'tts-1', prices: [unit('tts-1', 'azure_openai', 0.000012)], characters: 1000 })).toEqual({ cost: 0.012, source: 'custom_provider' });
  });
});

describe('unpriced is null, not free', () => {
  test('unknown models and kinds that do not list them', () => {
    expect(imageCost({ kind: 'custom', model: 'sdxl', prices: none, n: 1 })).toBeNull();
    expect(imageCost({ kind: 'google', model: 'dall-e-3', prices: none, n: 1 })).toBeNull();
    expect(speechCost({ kind: 'openai', model: 'unknown-tts', prices: none, characters: 10 })).toBeNull();
    expect(transcriptionCost({ kind: 'custom', model: 'whisper-large', prices: none, seconds: 10 })).toBeNull();
    expect(mediaPrice('openai', 'whisper-1', { media: 'image' }, none)).toBeNull();
    expect(imageWorstCase({ kind: 'mistral', model: 'dall-e-3', prices: none, n: 2 })).toBeNull();
  });

  test('every model the issue names has a list price', () => {
    expect(mediaListRow('image', { kind: 'openai', model: 'dall-e-3' })).not.toBeNull();
    for (const [media, model] of [['image', 'dall-e-3'], ['image', 'gpt-image-1'], ['transcription', 'whisper-1'], ['transcription', 'gpt-4o-transcribe'], ['speech', 'tts-1'], ['speech', 'gpt-4o-mini-tts']] as const) {
      expect(mediaPrice('openai', model, { media }, none)?.source).toBe('list');
    }
  });
});

describe('worst case before the call', () => {
  test('images: n at the requested size and quality, plus a token model’s input', () => {
    expect(imageWorstCase({ kind: 'openai', model: 'dall-e-3', prices: none, n: 2, size: '1792x1024', quality: 'hd' })).toEqual({ cost: 0.24, source: 'list' });
    expect(imageWorstCase({ kind: 'openai', model: 'dall-e-3', prices: none, n: 2, size: '1792x1024', quality: 'hd', promptCharacters: 4000 })).toEqual({ cost: 0.24, source: 'list' });
    // 2 x 0.1664 + 1000 chars x $5/M + 1 input image x 6000 x $10/M + 2 x 2 partials x 100 x $40/M
    expect(imageWorstCase({ kind: 'openai', model: 'gpt-image-1', prices: none, n: 2, size: '1024x1024', quality: 'high', promptCharacters: 1000, inputImages: 1, partialImages: 2 })).toEqual({ cost: 0.4138, source: 'list' });
    // `auto` at the dearest: 6240 tokens
    expect(imageWorstCase({ kind: 'openai', model: 'gpt-image-1', prices: none, n: 1, size: 'auto', quality: 'auto' })).toEqual({ cost: 0.2496, source: 'list' });
    expect(imageWorstCase({ kind: 'openai', model: 'gpt-image-1', prices: [unit('gpt-image-1', null, 0.2)], n: 3, inputImages: 4 })).toEqual({ cost: 0.6, source: 'custom' });
  });
});

describe('audio duration from the file header', () => {
  let dir: string;
  beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'media-cost-')); });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** A PCM WAV: RIFF header, `fmt ` chunk, `data` chunk of a sine wave. */
  function wav(seconds: number, sampleRate = 8000, channels = 1): Buffer {
    const samples = Math.round(seconds * sampleRate);
    const data = Buffer.alloc(samples * channels * 2);
    for (let i = 0; i < samples; i++) {
      for (let c = 0; c < channels; c++) data.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / sampleRate)), (i * channels + c) * 2);
    }
    const header = Buffer.alloc(44);
    header.write('RIFF', 0, 'ascii');
    header.writeUInt32LE(36 + data.length, 4);
    header.write('WAVE', 8, 'ascii');
    header.write('fmt ', 12, 'ascii');
    header.writeUInt32LE(16, 16); // fmt chunk size
    header.writeUInt16LE(1, 20); // PCM
    header.writeUInt16LE(channels, 22);
    header.writeUInt32LE(sampleRate, 24);
    header.writeUInt32LE(sampleRate * channels * 2, 28); // byte rate
    header.writeUInt16LE(channels * 2, 32); // block align
    header.writeUInt16LE(16, 34); // bits per sample
    header.write('data', 36, 'ascii');
    header.writeUInt32LE(data.length, 40);
    return Buffer.concat([header, data]);
  }

  /**
   * A constant-bitrate MP3 of silent frames: MPEG-1 Layer III, 128 kbit/s, 44.1 kHz, no CRC,
   * no padding (header FF FB 90 00): each frame 417 bytes (144 x 128000 / 44100, rounded down)
   * and 1152 samples. Zeroed side information and main data decode as silence.
   */
  function mp3(frames: number): Buffer {
    const frame = Buffer.alloc(417);
    frame.set([0xff, 0xfb, 0x90, 0x00]);
    return Buffer.concat(Array.from({ length: frames }, () => frame));
  }

  test('a WAV of a known length', async () => {
    const path = join(dir, 'tone.wav');
    writeFileSync(path, wav(1.5));
    expect(await audioDurationSeconds(path)).toBeCloseTo(1.5, 6);
    const stereo = join(dir, 'stereo.wav');
    writeFileSync(stereo, wav(2.25, 16000, 2));
    expect(await audioDurationSeconds(stereo)).toBeCloseTo(2.25, 6);
    // Held at the larger of the header and the size bound: 144,044 bytes at 750 a second.
    expect(await reservationSeconds(stereo)).toEqual({ seconds: 193, header: 2.25, bound: 193 });
  });

  test('an MP3 of 100 frames lasts 100 x 1152 / 44100 seconds', async () => {
    const path = join(dir, 'silence.mp3');
    writeFileSync(path, mp3(100));
    expect(await audioDurationSeconds(path)).toBeCloseTo((100 * 1152) / 44100, 2); // 2.612 s
  });

  test('an unreadable file gives null, and the reservation is its size at the format\'s floor', async () => {
    const path = join(dir, 'notes.txt');
    writeFileSync(path, 'not audio at all '.repeat(600)); // 10,200 bytes
    expect(await audioDurationSeconds(path)).toBeNull();
    expect(await reservationSeconds(path)).toEqual({ seconds: 14, header: null, bound: 14 }); // ceil(10200 / 750)
    expect(await audioDurationSeconds(join(dir, 'missing.wav'))).toBeNull();
    // Every upload at least 750 bytes a second, whatever its name says.
    expect(sizeBoundSeconds(26 * 1024 * 1024)).toBe(36_351);
    // A 1.2 MB file on whisper-1 is held at its size: at most 1,600 s -> $0.16.
    expect(transcriptionWorstCase({ kind: 'openai', model: 'whisper-1', prices: none, seconds: sizeBoundSeconds(1_200_000) })).toEqual({ cost: 0.16, source: 'list' });
  });

  test('a header that claims less than the file holds is not what is held (issue 20)', async () => {
    // 1,000 frames of 417 bytes (26 s at 128 kbit/s) behind an Info (CBR Xing) frame claiming 10 frames.
    const frames = mp3(1001);
    const tag = 4 + 32;
    frames.write('Info', tag, 'ascii');
    frames.writeUInt32BE(3, tag + 4); // frames and bytes fields present
    frames.writeUInt32BE(10, tag + 8);
    frames.writeUInt32BE(11 * 417, tag + 12);
    const path = join(dir, 'lying.mp3');
    writeFileSync(path, frames);
    const header = await audioDurationSeconds(path);
    expect(header).toBeLessThan(1);
    expect(await reservationSeconds(path)).toEqual({ seconds: 557, header, bound: 557 }); // ceil(417,417 / 750)
  });
});
