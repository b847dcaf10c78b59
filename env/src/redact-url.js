// How a URL-valued variable may be shown in a message: without its password, in the user part or
// in the query string. It works on the text as written, so a value no URL parser accepts (a wrong
// scheme, a libpq keyword string) is covered too, and errs towards hiding too much.

const HIDDEN = '***';
// A query (or libpq keyword) parameter that carries a secret: password, sslpassword, token, key,
// secret, X-Amz-Signature, X-Amz-Credential...
const SECRET_PARAMETER = /(^|[?&;\s])([\w.-]*(?:pass|pwd|token|secret|key|sig|credential|auth)[\w.-]*)=('[^']*'?|[^&;\s#]*)/gi;

/**
 * The user part's password hidden: from the first `:` after the scheme to the last `@`, so a
 * password holding an unescaped `@`, `/` or `?` is hidden whole.
 * @param {string} text
 */
function hideUserPassword(text) {
  const scheme = text.indexOf('://');
  const start = scheme === -1 ? 0 : scheme + 3;
  const at = text.lastIndexOf('@');
  if (at <= start) return text;
  const colon = text.indexOf(':', start);
  if (colon === -1 || colon > at) return text;
  // A URL that parses with no user at all (`host:5432/db?owner=a@b`): its `@` is no user part's end.
  const parsed = scheme !== -1 && URL.canParse(text) ? new URL(text) : undefined;
  if (parsed && parsed.username === '' && parsed.password === '') return text;
  return `${text.slice(0, colon + 1)}${HIDDEN}${text.slice(at)}`;
}

/**
 * `text` as a message may show it: a password in the user part or a secret parameter replaced by ***.
 * @param {string} text
 */
export function redactUrl(text) {
  return hideUserPassword(text).replace(SECRET_PARAMETER, (_, before, name) => `${before}${name}=${HIDDEN}`);
}
