import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

/**
 * A TCP proxy in front of PostgreSQL that a test can cut, to make "the database went away" happen
 * on demand to a server process that connects through it. Two faults:
 * - `cut()`: every connection is reset and new ones are refused (a primary that died) until `restore()`;
 * - `loseReplyAfter(marker)`: the next statement whose bytes contain `marker` (a unique idempotency
 *   key, sent as a bind parameter) reaches PostgreSQL and runs, but its reply never reaches the
 *   client: the connection is reset when the first reply bytes come back. A single-statement
 *   transaction has committed by then (PostgreSQL replies after the commit), so this is "the commit
 *   happened, the caller never learned it".
 */
export interface PgProxy {
  readonly port: number;
  cut(): Promise<void>;
  /** Listens again on the same port (nothing if it never stopped). */
  restore(): Promise<void>;
  loseReplyAfter(marker: string): void;
  /** How many replies `loseReplyAfter` swallowed. */
  readonly lostReplies: number;
  close(): Promise<void>;
}

export async function startPgProxy(upstreamPort: number, upstreamHost = '127.0.0.1'): Promise<PgProxy> {
  const sockets = new Set<Socket>();
  let armed: string | null = null;
  let lostReplies = 0;

  const onConnection = (client: Socket) => {
    const upstream = tcpConnect(upstreamPort, upstreamHost);
    sockets.add(client);
    sockets.add(upstream);
    let swallowNextReply = false;
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      if (armed !== null && chunk.includes(armed)) {
        armed = null;
        swallowNextReply = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (swallowNextReply) {
        lostReplies += 1;
        drop();
        return;
      }
      client.write(chunk);
    });
    for (const socket of [client, upstream]) {
      socket.on('error', drop);
      socket.on('close', () => {
        sockets.delete(socket);
        drop();
      });
    }
  };

  let server: Server = createServer(onConnection);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('proxy has no port');
  const port = address.port;

  const stop = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };

  return {
    port,
    cut: stop,
    async restore() {
      if (server.listening) return;
      server = createServer(onConnection);
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    },
    loseReplyAfter(marker) {
      armed = marker;
    },
    get lostReplies() {
      return lostReplies;
    },
    close: async () => {
      if (server.listening) await stop();
    },
  };
}
