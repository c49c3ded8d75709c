/**
 * Embedding vectors as the wires carry them: OpenAI's base64 form is the vector's float32 values
 * as little-endian bytes (whatever the machine's own byte order).
 */

/** A base64 embedding as floats; throws when it is not a whole number of float32 values. */
export function float32FromBase64(text: string): Float32Array {
  const bytes = Buffer.from(text, 'base64');
  if (bytes.length % 4 !== 0) throw new Error('A base64 embedding is not a whole number of float32 values.');
  const out = new Float32Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4);
  return out;
}

/** A float32 vector in OpenAI's base64 form. */
export function float32ToBase64(vector: Float32Array): string {
  const bytes = Buffer.allocUnsafe(vector.length * 4);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(vector[i]!, i * 4);
  return bytes.toString('base64');
}
