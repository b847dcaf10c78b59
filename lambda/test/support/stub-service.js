import http from 'node:http';

/**
 * A stand-in for POST /users that answers from a script, for the handler's unit tests.
 * `respond` gets the parsed users of each request and returns [status, body, headers?].
 * @param {(users: any[], n: number) => [number, unknown, Record<string, string>?]} respond
 */
export async function startStubService(respond) {
  /** @type {any[][]} */
  const requests = [];
  /** @type {import('node:http').IncomingHttpHeaders[]} */
  const requestHeaders = [];
  const server = http.createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      const users = JSON.parse(data);
      requests.push(users);
      requestHeaders.push(req.headers);
      const [status, body, headers = {}] = respond(users, requests.length);
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
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}
