import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';

/**
 * The floor under any HTTP face on this machine: a Node process that does nothing but read each
 * request's body and answer 201 with the document the real server gave a created withdrawal. The
 * bench drives it with the REST phase's own clients, so its rate is the most any Node HTTP server
 * can answer here before a single byte of the request is checked or stored, and its CPU per call is
 * what HTTP alone costs the server and the clients.
 */
function floorServer(answer: string): string {
  return `
import { createServer } from 'node:http';
const answer = ${JSON.stringify(answer)};
const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    JSON.parse(Buffer.concat(chunks).toString('utf8'));
    res.writeHead(201, { 'content-type': 'application/json', 'x-request-id': crypto.randomUUID() });
    res.end(answer);
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;
}

export interface HttpFloor {
  baseUrl: string;
  pid: number;
  stop(): Promise<void>;
}

/** `answer`: the body the real server gave a created withdrawal, answered to every request. */
export async function startHttpFloor(answer: string, nodeArgs: string[] = []): Promise<HttpFloor> {
  const child: ChildProcess = spawn(
    process.execPath,
    [...nodeArgs, '--input-type=module', '-e', floorServer(answer)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const [line] = (await once(child.stdout as NodeJS.ReadableStream, 'data')) as [Buffer];
  const port = Number(line.toString().trim());
  if (!Number.isInteger(port) || port <= 0)
    throw new Error(`the HTTP floor server printed ${line.toString()}`);
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    pid: child.pid ?? 0,
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}
