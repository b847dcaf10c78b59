import { parseMediaType } from './media-type.js';

// The types served aside (the streamed imports); any other goes on to the JSON body's step.

/**
 * @param {Record<string, import('express').RequestHandler>} routes by lower-case media type
 * @returns {import('express').RequestHandler}
 */
export function byContentType(routes) {
  const byType = new Map(Object.entries(routes));
  const jsonLike = [...byType.keys()].filter((t) => t.startsWith('application/json'));
  return (req, res, next) => {
    const header = req.headers['content-type'];
    // The JSON array, by far the most common, costs a comparison or two.
    if (
      header === undefined ||
      (header.startsWith('application/json') && !jsonLike.some((t) => header.startsWith(t)))
    )
      return next();
    const type = parseMediaType(header);
    const route = type ? byType.get(type.type) : undefined;
    return route ? route(req, res, next) : next();
  };
}
