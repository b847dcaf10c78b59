// `Expect: 100-continue` (RFC 9110, 10.1.1): sent only once a request is admitted and its headers
// pass, so a refused request never sends its body (node-server.js holds Node's own back).

/** @type {WeakSet<import('node:http').ServerResponse>} */
const held = new WeakSet();

/** @param {import('node:http').ServerResponse} res */
export function holdContinue(res) {
  held.add(res);
}

/** Lets the body come, once. @param {import('node:http').ServerResponse} res */
export function sendContinue(res) {
  if (held.delete(res) && !res.headersSent) res.writeContinue();
}

/** @param {import('node:http').ServerResponse} res */
export const awaitsContinue = (res) => held.has(res);
