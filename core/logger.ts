import pino from 'pino';

export type Logger = pino.Logger;

/** Secrets never reach logs: credentials in headers and the few fields that carry them are cut. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  '*.secret',
  '*.secrets',
  '*.fallback_secrets',
  '*.management_token',
  '*.password',
];

export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info', name = 'gw'): Logger {
  return pino({ name, level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } });
}
