import { redactUrl } from './redact-url.js';

// The parsers a declaration names: text to value, or a TypeError whose message follows the
// variable's name ("must be ..."); `kind` says what it accepts, for --help and the doc.

/** @template T @typedef {{ kind: string, parse: (text: string) => T }} Parser */

/** @param {string} problem */
const refuse = (problem) => {
  throw new TypeError(problem);
};

/** @param {{ min?: number, max?: number, unit?: string }} [bounds] @returns {Parser<number>} */
export function integer({ min = 0, max = Number.MAX_SAFE_INTEGER, unit } = {}) {
  const range = max === Number.MAX_SAFE_INTEGER ? `at least ${min}` : `from ${min} to ${max}`;
  return {
    kind: `a whole number ${range}${unit ? ` (${unit})` : ''}`,
    parse(text) {
      const trimmed = text.trim();
      if (!/^\d+$/.test(trimmed)) refuse(`must be a whole number, got ${JSON.stringify(text)}`);
      const value = Number(trimmed);
      if (value < min || value > max) refuse(`must be between ${min} and ${max}, got ${value}`);
      return value;
    },
  };
}

/**
 * Digits, an optional fraction (`.5`), no sign or exponent.
 * @param {{ min: number, max: number }} bounds @returns {Parser<number>}
 */
export function decimal({ min, max }) {
  return {
    kind: `a number from ${min} to ${max}`,
    parse(text) {
      const trimmed = text.trim();
      if (!/^(?:\d+(?:\.\d*)?|\.\d+)$/.test(trimmed))
        refuse(`must be a number from ${min} to ${max}, got ${JSON.stringify(text)}`);
      const value = Number(trimmed);
      if (value < min || value > max) refuse(`must be between ${min} and ${max}, got ${value}`);
      return value;
    },
  };
}

/** A duration in milliseconds. @param {{ min?: number, max?: number }} [bounds] */
export const milliseconds = (bounds) => integer({ ...bounds, unit: 'milliseconds' });

const ON = ['on', 'true', '1', 'yes'];
const OFF = ['off', 'false', '0', 'no'];

/** on/true/1/yes or off/false/0/no, in any case. @type {Parser<boolean>} */
export const boolean = {
  kind: 'on or off (also true/false, 1/0, yes/no)',
  parse(text) {
    const word = text.trim().toLowerCase();
    if (ON.includes(word)) return true;
    if (OFF.includes(word)) return false;
    return refuse(`must be on or off, got ${JSON.stringify(text)}`);
  },
};

/**
 * Each word its own type: `(typeof LIST)[number]` names them.
 * @template {string} const T @param {readonly T[]} words @returns {readonly T[]}
 */
export const frozenWords = (words) => Object.freeze(words);

/** @template {string} const T @param {readonly T[]} allowed @returns {Parser<T>} */
export function oneOf(allowed) {
  return {
    kind: `one of ${allowed.join(', ')}`,
    parse(text) {
      const word = text.trim();
      const found = allowed.find((w) => w === word);
      if (found !== undefined) return found;
      return refuse(`must be one of ${allowed.join(', ')}, got ${JSON.stringify(word)}`);
    },
  };
}

/**
 * `protocols` without a colon; a refusal quotes it redacted.
 * @param {{ protocols: string[], trimSlashes?: boolean }} options @returns {Parser<string>}
 */
export function url({ protocols, trimSlashes = false }) {
  const names = `a URL (${protocols.map((p) => `${p}://`).join(' or ')})`;
  return {
    kind: names,
    parse(text) {
      const trimmed = text.trim();
      /** @type {URL | undefined} */
      let parsed;
      try {
        parsed = new URL(trimmed);
      } catch {
        // refused below
      }
      if (!parsed || !protocols.includes(parsed.protocol.slice(0, -1)))
        refuse(`must be ${names}, got ${JSON.stringify(redactUrl(trimmed))}`);
      return trimSlashes ? trimmed.replace(/\/+$/, '') : trimmed;
    },
  };
}

/** Trimmed. @param {RegExp} pattern @param {string} kind @returns {Parser<string>} */
export function matching(pattern, kind) {
  return {
    kind,
    parse(text) {
      const trimmed = text.trim();
      if (!pattern.test(trimmed)) refuse(`must be ${kind}, got ${JSON.stringify(trimmed)}`);
      return trimmed;
    },
  };
}

/**
 * `trim: false`: a secret may hold any character.
 * @param {{ trim?: boolean }} [options] @returns {Parser<string>}
 */
export function text({ trim = true } = {}) {
  return { kind: 'text', parse: (value) => (trim ? value.trim() : value) };
}
