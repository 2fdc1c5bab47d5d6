/**
 * A server on 127.0.0.1 that answers every request with `reached`: what the network tests
 * try to reach from inside and outside the sandbox.
 */
import { createServer } from 'node:http';

export interface Reachable {
  url: string;
  close(): Promise<void>;
}

export async function reachableServer(): Promise<Reachable> {
  const server = createServer((_req, res) => res.end('reached'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/`;
  return { url, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
