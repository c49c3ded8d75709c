import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/** One message the catcher accepted, parsed: `to` as its header reads, each header one line. */
export type CaughtMail = { to: string; subject: string; text: string; html: string; headerLines: string[] };

/**
 * A real SMTP server (the `smtp-server` package) on a free local port that keeps every message
 * it accepts, parsed; the gateway's mailer sends to it as to any server (`smtp://127.0.0.1:<port>`).
 */
export async function startMailCatcher(): Promise<{ url: string; mails: CaughtMail[]; close(): Promise<void> }> {
  const mails: CaughtMail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, done) {
      simpleParser(stream).then((m) => {
        mails.push({
          to: [m.to].flat().map((a) => a?.text ?? '').join(','),
          subject: m.subject ?? '',
          text: m.text ?? '',
          html: typeof m.html === 'string' ? m.html : '',
          headerLines: m.headerLines.map((h) => h.line.replace(/\r?\n[ \t]+/g, ' ')),
        });
        done();
      }, done);
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.server.address() as AddressInfo;
  return { url: `smtp://127.0.0.1:${port}`, mails, close: () => new Promise((r) => server.close(() => r())) };
}

/** The address of a caught mail's one-click unsubscribe (its `List-Unsubscribe` header). */
export function unsubscribeLinkOf(mail: CaughtMail): string {
  const line = mail.headerLines.find((h) => /^List-Unsubscribe:/i.test(h));
  const link = line?.match(/<([^>]+)>/)?.[1];
  if (!link) throw new Error(`no List-Unsubscribe link in the mail to ${mail.to}`);
  return link;
}
