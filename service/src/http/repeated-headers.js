/**
 * Node keeps the first silently, so callers refuse rather than guess; `names` lower-case.
 * @param {import('node:http').IncomingMessage} req @param {string[]} names @returns {string[]}
 */
export function repeatedHeaders(req, names) {
  /** @type {Set<string>} */
  const seen = new Set();
  /** @type {string[]} */
  const repeated = [];
  const lengths = names.map((n) => n.length);
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    // A length first: most headers are ruled out without lower-casing (a new string) each.
    if (!lengths.includes(req.rawHeaders[i].length)) continue;
    const name = req.rawHeaders[i].toLowerCase();
    if (!names.includes(name)) continue;
    if (seen.has(name) && !repeated.includes(name)) repeated.push(name);
    seen.add(name);
  }
  return repeated;
}
