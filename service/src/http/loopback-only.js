import { ApiError } from '../errors.js';

// What the service says about itself is for the machine it runs on, unless the operator opens it.

/** @param {string | undefined} address  a socket's remote address */
export function isLoopback(address) {
  if (address === undefined) return false;
  const v4 = address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
  return v4 === '::1' || v4.startsWith('127.');
}

/**
 * @param {string} route for the refusal @param {{ open: boolean }} options
 * @returns {import('express').RequestHandler}
 */
export function loopbackOnly(route, { open }) {
  if (open) return (_req, _res, next) => next();
  return (req, _res, next) => {
    if (isLoopback(req.socket.remoteAddress)) return next();
    next(
      new ApiError(
        'not_found',
        `${route} is served to loopback addresses only; ` +
          `METRICS_PUBLIC=true serves it to every address`,
      ),
    );
  };
}
