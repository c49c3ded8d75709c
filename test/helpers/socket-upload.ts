import net from 'node:net';

export type Upload = { answer: string; sent: number; error: string | null };

export type SocketUploadOptions = {
  /** Pause between 1 MB writes, in ms. */
  paceMs: number;
  /** The byte the body is filled with (a space keeps a JSON body's prefix valid). */
  fill?: string;
  /** Bytes sent first, counted in `total` (a multipart part's head). */
  preamble?: Buffer;
  /** Hang up (destroy the socket) once this many bytes were sent: a client gone mid-upload. */
  stopAfter?: number;
};

/**
 * A client that sends its whole declared body before it reads anything, as a plain socket:
 * the request head, then `total` bytes in 1 MB writes, paced and honouring backpressure,
 * whatever the server answers meanwhile; it stops at the first error. Resolves with what it
 * received once the connection is closed. Headers given override the defaults.
 */
export function socketUpload(url: string, headers: Record<string, string>, total: number, options: SocketUploadOptions): Promise<Upload> {
  const { hostname, port, pathname } = new URL(url);
  const chunk = Buffer.alloc(1_000_000, options.fill ?? ' ');
  const stopAfter = options.stopAfter ?? Infinity;
  return new Promise((resolve) => {
    const outcome: Upload = { answer: '', sent: 0, error: null };
    // Half-open: the server's FIN after its answer does not stop this client sending.
    const socket = net.connect({ port: Number(port), host: hostname, allowHalfOpen: true });
    socket.setEncoding('utf8');
    socket.on('data', (c: string) => (outcome.answer += c));
    socket.on('error', (err: NodeJS.ErrnoException) => (outcome.error ??= err.code ?? err.message));
    socket.on('close', () => resolve(outcome));
    const head = { host: `${hostname}:${port}`, 'content-length': String(total), ...headers };
    socket.write(`POST ${pathname} HTTP/1.1\r\n${Object.entries(head).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`);
    if (options.preamble) {
      outcome.sent += options.preamble.length;
      socket.write(options.preamble);
    }
    const pump = () => {
      if (socket.destroyed) return;
      if (outcome.sent >= stopAfter) return void socket.destroy();
      if (outcome.sent >= total) return void socket.end();
      const size = Math.min(chunk.length, total - outcome.sent);
      outcome.sent += size;
      const more = socket.write(size === chunk.length ? chunk : chunk.subarray(0, size));
      if (more) setTimeout(pump, options.paceMs);
      else socket.once('drain', () => setTimeout(pump, options.paceMs));
    };
    pump();
  });
}
