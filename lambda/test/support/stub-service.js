import http from 'node:http';

/** @typedef {(items: any[], n: number, path: string) => [number, unknown, Record<string, string>?]} Respond */
/**
 * A stand-in for POST /users and POST /erasures that answers from a script, for the handler's
 * tests. `respond` gets the parsed items of each request, its number and its path, and returns
 * [status, body, headers?].
 * @param {Respond} respond
 */
export async function startStubService(respond) {
  /** @type {any[][]} */
  const requests = [];
  /** @type {import('node:http').IncomingHttpHeaders[]} */
  const requestHeaders = [];
  /** @type {string[]} */
  const paths = [];
  const server = http.createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      const users = JSON.parse(data);
      requests.push(users);
      requestHeaders.push(req.headers);
      paths.push(String(req.url));
      const [status, body, headers = {}] = respond(users, requests.length, String(req.url));
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    /** each request's headers, in the order of `requests` */
    headers: requestHeaders,
    /** each request's path, in the order of `requests` */
    paths,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}
