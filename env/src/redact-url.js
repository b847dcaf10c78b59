// On the text as written (so a value no URL parser takes is covered too), erring towards hiding too
// much.

const HIDDEN = '***';
// A query or libpq keyword parameter that carries a secret.
const SECRET_PARAMETER =
  /(^|[?&;\s])([\w.-]*(?:pass|pwd|token|secret|key|sig|credential|auth)[\w.-]*)=('[^']*'?|[^&;\s#]*)/gi;

/** To the last `@`: a password with an unescaped `@`, `/` or `?` too. @param {string} text */
function hideUserPassword(text) {
  const scheme = text.indexOf('://');
  const start = scheme === -1 ? 0 : scheme + 3;
  const at = text.lastIndexOf('@');
  const colon = text.indexOf(':', start);
  if (at <= start || colon === -1 || colon > at) return text;
  // A URL with no user part (`h:5432/db?owner=a@b`): its `@` ends none.
  const parsed = scheme !== -1 && URL.canParse(text) ? new URL(text) : undefined;
  if (parsed && parsed.username === '' && parsed.password === '') return text;
  return `${text.slice(0, colon + 1)}${HIDDEN}${text.slice(at)}`;
}

/** @param {string} text */
export function redactUrl(text) {
  return hideUserPassword(text).replace(
    SECRET_PARAMETER,
    (_, before, name) => `${before}${name}=${HIDDEN}`,
  );
}
