import { ConfigError, loadConfig } from '../core/config';
import { createLogger } from '../core/logger';
import { createApp } from './app';
import { listen } from './listen';
import { startApiRuntime } from './runtime';

/** Production entry of the API process. It keeps no state of its own: run as many as needed. */
async function main(): Promise<void> {
  const log = createLogger(process.env.LOG_LEVEL, 'gw-api');
  try {
    const config = loadConfig();
    const runtime = await startApiRuntime(config, log);
    const http = await listen(createApp(runtime.deps), config.PORT, config.HOST);
    log.info({ port: http.port }, `API listening on http://localhost:${http.port}`);
    const stop = async () => {
      await http.close();
      await runtime.close();
    };
    process.once('SIGINT', () => void stop());
    process.once('SIGTERM', () => void stop());
  } catch (err) {
    console.error(`gw-api: ${(err as Error).message}`);
    if (!(err instanceof ConfigError)) log.debug({ err }, 'start-up failed');
    process.exit(1);
  }
}

void main();
