// Duplicate keys in a JSON object, which JSON.parse drops silently (the last wins) and I-JSON (RFC
// 7493) forbids: the keys in the text counted against those in the parsed value, and only when they
// differ is the text walked again to say where. Shared by the JSON body and the stream's parser.

/**
 * Index of the quote closing the string at `open`.
 * @param {string} text valid JSON
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
 * Keys in the text: strings followed by a colon, found string to string with indexOf.
 * @param {string} text valid JSON
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
 * Keys in the parsed value, walked with a stack of its own (deep nesting cannot overflow).
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
 * index: the top-level array's item it is in (null: no array).
 * @typedef {{ index: number | null, key: string }} DuplicateKey
 */

/**
 * Every key twice in one object, in text order, up to `limit` (slow: only once counted).
 * @param {string} text
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
    else if (c === ',' && open.at(-1)?.keys === null)
      /** @type {{ index: number }} */ (open.at(-1)).index++;
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
 * The keys given twice in one object of a parsed body, or [].
 * @param {string} text
 * @param {unknown} value JSON.parse's
 * @param {number} [limit]
 * @returns {DuplicateKey[]}
 */
export function findDuplicateKeys(text, value, limit = 100) {
  if (countKeysInText(text) === countKeysInValue(value)) return [];
  return locateDuplicateKeys(text, limit);
}
