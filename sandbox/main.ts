/** `npm run sandbox`: the provider simulator on its own (PORT, default 8090). */
import { SANDBOX_SECRET_PREFIX, startSandbox } from './server';

void startSandbox(Number(process.env.PORT ?? 8090), process.env.HOST ?? '127.0.0.1').then((sandbox) => {
  console.log(`[sandbox] ${sandbox.url}: /openai/v1, /azure/openai, /anthropic/v1, /google/v1beta (chat, video, images, audio); secrets starting ${SANDBOX_SECRET_PREFIX}`);
  const stop = () => void sandbox.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
});
