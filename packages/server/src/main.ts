import { startServer } from './app.ts';
import { readEnv } from './env.ts';

/** `pnpm start`: serve until SIGINT or SIGTERM, then close connections and the database cleanly. */
const env = readEnv();
const running = await startServer(env);
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    running.log.info({ signal }, 'stopping');
    running.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}
