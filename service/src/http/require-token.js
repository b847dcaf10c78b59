import { createHash, timingSafeEqual } from 'node:crypto';
import { ApiError } from '../errors.js';
import { repeatedHeaders } from './repeated-headers.js';

/** @param {string} s */
const digest = (s) => createHash('sha256').update(s).digest();

/**
 * Bearer-token check. Both sides are hashed first so that timingSafeEqual compares equal lengths
 * and the time taken tells nothing about the token, not even its length.
 *
 * @param {string | undefined} token  unset: no authentication
 * @returns {import('express').RequestHandler}
 */
export function requireToken(token) {
  if (!token) return (_req, _res, next) => next();
  const expected = digest(token);
  return (req, _res, next) => {
    if (repeatedHeaders(req, ['authorization']).length > 0) {
      return next(new ApiError('duplicate_header', 'Authorization is given more than once; send it once'));
    }
    // The scheme is case-insensitive (RFC 9110, 11.1); spaces after it are allowed, as many as sent.
    const match = /^Bearer +(.+)$/i.exec(req.get('authorization') ?? '');
    if (match && timingSafeEqual(digest(match[1]), expected)) return next();
    next(new ApiError('unauthorized'));
  };
}
