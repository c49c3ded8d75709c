import nodemailer from 'nodemailer';
import type { SendOutcome } from '../webhooks/send';

export type MailMessage = { to: string[]; subject: string; text: string; html: string; headers?: Record<string, string> };

/** Sends one email; answers like a webhook attempt, so a delivery records either the same way. */
export type Mailer = (message: MailMessage) => Promise<SendOutcome>;

/**
 * Each SMTP step's limit (connect, greeting, each socket wait). Three of them stay under the
 * delivery attempt's own limit, so a slow server fails the attempt instead of outliving it and
 * sending after the attempt was counted lost (a duplicate on the next one).
 */
const SMTP_STEP_TIMEOUT_MS = 4_000;

/**
 * Alert email through SMTP (nodemailer) at `smtpUrl`; without one, every send fails with a
 * reason the delivery log shows, so a channel set up before SMTP is configured says why.
 */
export function createMailer(smtpUrl: string | undefined, from: string): Mailer {
  if (!smtpUrl) return async () => ({ ok: false, status: null, error: 'SMTP_URL is not set: email cannot be sent' });
  const transport = nodemailer.createTransport({
    url: smtpUrl,
    connectionTimeout: SMTP_STEP_TIMEOUT_MS,
    greetingTimeout: SMTP_STEP_TIMEOUT_MS,
    socketTimeout: SMTP_STEP_TIMEOUT_MS,
  } as Parameters<typeof nodemailer.createTransport>[0]);
  return async (message) => {
    try {
      await transport.sendMail({ from, to: message.to, subject: message.subject, text: message.text, html: message.html, headers: message.headers });
      return { ok: true, status: null, error: null };
    } catch (err) {
      // The server's words only: never the URL, which may carry credentials.
      return { ok: false, status: null, error: `the mail server refused or could not be reached: ${(err as Error).message}`.slice(0, 300) };
    }
  };
}
