// Strict (RFC 9110, 8.3.1): whatever is guessed about a charset would be stored.

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const QUOTED = '"(?:[^"\\\\\\x00-\\x08\\x0a-\\x1f\\x7f]|\\\\[\\t\\x20-\\x7e\\x80-\\xff])*"';
const TYPE = new RegExp(`^${TOKEN}/${TOKEN}`);
// OWS ";" OWS [ name "=" ( token / quoted-string ) ]: an empty parameter, not a bare name.
const PARAMETER = new RegExp(`[ \\t]*;[ \\t]*(?:(${TOKEN})=(${TOKEN}|${QUOTED}))?`, 'y');

/**
 * Names lower-cased; null: malformed.
 * @param {string} header @returns {{ type: string, parameters: Map<string, string> } | null}
 */
export function parseMediaType(header) {
  const type = TYPE.exec(header);
  if (!type) return null;
  /** @type {Map<string, string>} */
  const parameters = new Map();
  let at = type[0].length;
  while (at < header.length) {
    PARAMETER.lastIndex = at;
    const parameter = PARAMETER.exec(header);
    if (!parameter)
      return /^[ \t]*$/.test(header.slice(at)) ? { type: type[0].toLowerCase(), parameters } : null;
    at = PARAMETER.lastIndex;
    const [, name, value] = parameter;
    if (name === undefined) continue;
    const key = name.toLowerCase();
    if (parameters.has(key)) return null;
    parameters.set(key, value.startsWith('"') ? value.slice(1, -1).replace(/\\(.)/g, '$1') : value);
  }
  return { type: type[0].toLowerCase(), parameters };
}
