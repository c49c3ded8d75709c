/**
 * `npm start` without SMTP_URL: a local mail catcher (MailDev, a maintained package) takes the
 * alert emails over SMTP and shows them in a web inbox, so email channels can be tried without
 * a mail server. Nothing leaves the machine. ESM-only, hence the dynamic import.
 */
export type MailCatcher = { smtpUrl: string; inboxUrl: string; stop(): Promise<void> };

export async function startMailCatcher(smtpPort: number, webPort: number, mailDirectory: string): Promise<MailCatcher> {
  const { MailDev } = await import('maildev');
  const maildev = new MailDev({ smtp: smtpPort, web: webPort, ip: '127.0.0.1', webIp: '127.0.0.1', silent: true, mailDirectory });
  await maildev.start();
  return {
    smtpUrl: `smtp://127.0.0.1:${smtpPort}`,
    inboxUrl: `http://localhost:${webPort}`,
    stop: () => maildev.stop(),
  };
}
