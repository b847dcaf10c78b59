// `Expect: 100-continue` (RFC 9110, 10.1.1): the client waits for `100 Continue` before it sends its
// body. Node sends it at once unless the server handles 'checkContinue' (http/node-server.js);
// sluice sends it only when the request is admitted and its headers pass, so a request refused
// for its headers, its token or the in-flight budget never sends the body at all.

/** @type {WeakSet<import('node:http').ServerResponse>} */
const held = new WeakSet();

/** The server holds back this response's `100 Continue` until the body is wanted. @param {import('node:http').ServerResponse} res */
export function holdContinue(res) {
  held.add(res);
}

/** Lets the body come: sends the held `100 Continue`, once. @param {import('node:http').ServerResponse} res */
export function sendContinue(res) {
  if (held.delete(res) && !res.headersSent) res.writeContinue();
}

/** True while the client waits for `100 Continue` and has not been sent it. @param {import('node:http').ServerResponse} res */
export const awaitsContinue = (res) => held.has(res);
