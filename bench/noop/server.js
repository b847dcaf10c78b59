#!/usr/bin/env node
// The no-op reference of the capacity bench: an Express endpoint that parses the JSON body as
// express.json() does and writes nothing, answering as if every user were new. What any Express
// service pays per request before it does its job; sluice's service cost is read against it. Like
// the naive endpoint (bench/naive/), it prints {"msg":"listening","port":n} on PORT (0: any) and HOST.
import express from 'express';

const app = express();
app.disable('x-powered-by');
app.use(express.json({ limit: '10mb' }));
app.post('/users', (req, res) => {
  const received = Array.isArray(req.body) ? req.body.length : 0;
  res.status(201).json({ received, inserted: received, updated: 0, duplicates: 0 });
});
const server = app.listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? '127.0.0.1', () => {
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  console.log(JSON.stringify({ msg: 'listening', port }));
});
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  setInterval(() => server.closeIdleConnections(), 100).unref();
});
