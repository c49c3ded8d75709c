import nodemailer from 'nodemailer';
import type { SendOutcome } from '../webhooks/send';

export type MailMessage = { to: string[]; subject: string; text: string; html: string };

/** Sends one email; answers like a webhook attempt, so a delivery records either the same way. */
export type Mailer = (message: MailMessage) => Promise<SendOutcome>;

/** How long an SMTP server has to accept a message, connection included. */
const SMTP_TIMEOUT_MS = 10_000;

/**
 * Alert email through SMTP (nodemailer) at `smtpUrl`; without one, every send fails with a
 * reason the delivery log shows, so a channel set up before SMTP is configured says why.
 */
export function createMailer(smtpUrl: string | undefined, from: string): Mailer {
  if (!smtpUrl) return async () => ({ ok: false, status: null, error: 'SMTP_URL is not set: email cannot be sent' });
  const transport = nodemailer.createTransport({
    url: smtpUrl,
    connectionTimeout: SMTP_TIMEOUT_MS,
    greetingTimeout: SMTP_TIMEOUT_MS,
    socketTimeout: SMTP_TIMEOUT_MS,
  } as Parameters<typeof nodemailer.createTransport>[0]);
  return async (message) => {
    try {
      await transport.sendMail({ from, to: message.to, subject: message.subject, text: message.text, html: message.html });
      return { ok: true, status: null, error: null };
    } catch (err) {
      // The server's words only: never the URL, which may carry credentials.
      return { ok: false, status: null, error: `the mail server refused or could not be reached: ${(err as Error).message}`.slice(0, 300) };
    }
  };
}
