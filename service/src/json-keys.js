// Duplicate keys in a JSON object: JSON.parse keeps the last value and says nothing, so
// {"email": "a@x.io", "name": "A", "email": "b@x.io"} would store b@x.io. I-JSON (RFC 7493) forbids
// duplicate names; sluice refuses them. The check is a count, cheap enough for every body: the keys
// in the text against the keys in the parsed value. Only when they differ is the text walked again
// to say where.

/**
 * Index of the quote that closes the string opening at `open`.
 * @param {string} text  valid JSON
 * @param {number} open
 */
function closingQuote(text, open) {
  let end = text.indexOf('"', open + 1);
  while (text.charCodeAt(end - 1) === 92) {
    let first = end - 1;
    while (text.charCodeAt(first - 1) === 92) first--;
    if ((end - first) % 2 === 0) break; // an even run of backslashes escapes itself, not the quote
    end = text.indexOf('"', end + 1);
  }
  return end;
}

/** @param {number} c */
const isJsonSpace = (c) => c === 32 || c === 10 || c === 13 || c === 9;

/**
 * Keys written in the text: strings followed by a colon. Outside strings valid JSON has no quote
 * but the ones that open strings, so jumping from string to string with indexOf is enough.
 * @param {string} text  text that JSON.parse accepted
 */
function countKeysInText(text) {
  let keys = 0;
  let open = text.indexOf('"');
  while (open !== -1) {
    let next = closingQuote(text, open) + 1;
    while (isJsonSpace(text.charCodeAt(next))) next++;
    if (text.charCodeAt(next) === 58) keys++;
    open = text.indexOf('"', next);
  }
  return keys;
}

/**
 * Keys in the parsed value, walked with a stack of its own so that deep nesting cannot overflow.
 * @param {unknown} value
 */
function countKeysInValue(value) {
  let keys = 0;
  const pending = [value];
  while (pending.length > 0) {
    const v = pending.pop();
    if (v === null || typeof v !== 'object') continue;
    if (Array.isArray(v)) {
      for (const item of v) if (item !== null && typeof item === 'object') pending.push(item);
      continue;
    }
    for (const key in v) {
      keys++;
      const item = /** @type {Record<string, unknown>} */ (v)[key];
      if (item !== null && typeof item === 'object') pending.push(item);
    }
  }
  return keys;
}

/**
 * @typedef {{ index: number | null, key: string }} DuplicateKey
 *   index: the item of the top-level array the object belongs to (null when the body is no array)
 */

/**
 * Every key that appears twice in one object, in text order, up to `limit`. Slow (a Set per
 * object), so only run once the counts have shown there is one.
 * @param {string} text  text that JSON.parse accepted
 * @param {number} limit
 * @returns {DuplicateKey[]}
 */
function locateDuplicateKeys(text, limit) {
  /** @type {DuplicateKey[]} */
  const found = [];
  /** @type {{ keys: Set<string> | null, index: number }[]} keys null: an array */
  const open = [];
  for (let i = 0; i < text.length && found.length < limit; i++) {
    const c = text[i];
    if (c === '{') open.push({ keys: new Set(), index: 0 });
    else if (c === '[') open.push({ keys: null, index: 0 });
    else if (c === '}' || c === ']') open.pop();
    else if (c === ',' && open.at(-1)?.keys === null) /** @type {{ index: number }} */ (open.at(-1)).index++;
    else if (c === '"') {
      const end = closingQuote(text, i);
      let next = end + 1;
      while (isJsonSpace(text.charCodeAt(next))) next++;
      const keys = open.at(-1)?.keys;
      if (text[next] === ':' && keys) {
        const key = JSON.parse(text.slice(i, end + 1)); // "em\u0061il" is "email" too
        if (keys.has(key)) found.push({ index: open[0].keys === null ? open[0].index : null, key });
        else keys.add(key);
      }
      i = end;
    }
  }
  return found;
}

/**
 * The keys given twice in one object of a parsed body, or [] when there is none.
 * @param {string} text  the body, which JSON.parse accepted
 * @param {unknown} value  what JSON.parse made of it
 * @param {number} [limit]  at most this many are located
 * @returns {DuplicateKey[]}
 */
export function findDuplicateKeys(text, value, limit = 100) {
  if (countKeysInText(text) === countKeysInValue(value)) return [];
  return locateDuplicateKeys(text, limit);
}
