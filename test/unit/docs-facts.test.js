// The docs state facts that live elsewhere too; each is checked here against where it lives, so the
// next change that makes one untrue fails a test. Files only: what needs the running service (metric
// names: service/test/integration/metrics-docs.test.js) or a build (the feeder's artifact size:
// lambda/test/system/artifact.test.js) is checked in the tier that has it.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { SECTIONS } from '../../scripts/configuration-doc.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** @param {string} file a path from the root @returns {string} */
const read = (file) => readFileSync(path.join(root, file), 'utf8');
const DOCS = readdirSync(path.join(root, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => `docs/${f}`);

/**
 * The rows of the Markdown table whose header row starts with `header`: each row's cells, trimmed.
 * @param {string} markdown @param {string} header
 * @returns {string[][]}
 */
export function tableRows(markdown, header) {
  const lines = markdown.split('\n');
  const start = lines.findIndex((l) => l.startsWith(header));
  assert.ok(start >= 0, `a table headed ${header}`);
  /** @type {string[][]} */
  const rows = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .replace(/^\||\|$/g, '')
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

/** The code spans of a cell, in order. @param {string} cell */
const codeSpans = (cell) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);

describe("deploy-aws.md's parameter table is template.yaml's Parameters", () => {
  const parameters = /** @type {Record<string, { Default?: unknown }>} */ (
    parse(read('template.yaml')).Parameters
  );
  const rows = tableRows(read('docs/deploy-aws.md'), '| parameter | default |');

  test('every parameter listed, none that is not one', () => {
    const listed = rows.flatMap(([names]) => codeSpans(names));
    assert.deepEqual([...listed].sort(), Object.keys(parameters).sort());
  });

  test('each default as the template has it ("empty" and "(required)" for none)', () => {
    for (const [names, defaults] of rows) {
      const ns = codeSpans(names);
      const stated = /^(empty|\(required\))$/.test(defaults)
        ? ns.map(() => '')
        : codeSpans(defaults);
      assert.equal(stated.length, ns.length, `${names}: one default for each (${defaults})`);
      for (const [i, name] of ns.entries())
        assert.equal(stated[i], String(parameters[name]?.Default ?? ''), `${name}'s default`);
    }
  });
});

// Units a default may be stated in, by what the variable holds.
const UNITS = /** @type {Record<string, number>} */ ({
  ms: 1,
  s: 1000,
  min: 60_000,
  KiB: 1024,
  MiB: 1024 ** 2,
  GiB: 1024 ** 3,
});

/**
 * What `` `NAME` (…) `` says of a variable's default, when it says something checkable: a number
 * (with its unit), `required`, or `` `value` by default ``; undefined for anything else (an
 * aside that is no default).
 * @param {string} aside  the text in the parentheses
 * @returns {{ number: number } | { text: string } | { required: true } | undefined}
 */
export function statedDefault(aside) {
  const number = /^(\d[\d,]*(?:\.\d+)?)\s*(ms|s|min|KiB|MiB|GiB)?\b/.exec(aside);
  if (number)
    return { number: Number(number[1].replaceAll(',', '')) * (number[2] ? UNITS[number[2]] : 1) };
  if (/^required\b/.test(aside)) return { required: true };
  const text = /^`([^`]+)` by default\b/.exec(aside);
  return text ? { text: text[1] } : undefined;
}

describe("defaults stated in the docs are the configuration's", () => {
  /** @type {Map<string, { default?: unknown, required?: boolean }>} */
  const declared = new Map();
  for (const { declarations } of SECTIONS)
    for (const [name, d] of Object.entries(declarations))
      declared.set(name, /** @type {any} */ (d));

  test('the parser reads what the docs write', () => {
    assert.deepEqual(statedDefault('3 s by default; a request written in a group first'), {
      number: 3000,
    });
    assert.deepEqual(statedDefault('1 GiB decoded'), { number: 1024 ** 3 });
    assert.deepEqual(statedDefault('1000 messages'), { number: 1000 });
    assert.deepEqual(statedDefault('30000'), { number: 30000 });
    assert.deepEqual(statedDefault('`ignore` by default, or `merge`'), { text: 'ignore' });
    assert.deepEqual(statedDefault('required'), { required: true });
    assert.equal(statedDefault('local runner'), undefined);
  });

  let checked = 0;
  for (const file of ['README.md', ...DOCS.filter((f) => f !== 'docs/configuration.md')]) {
    test(`${file}: every \`VARIABLE\` (default) is the declared default`, () => {
      const text = read(file);
      for (const m of text.matchAll(/`([A-Z][A-Z0-9_]+)`\s*\(([^)]*)\)/g)) {
        const [, name, aside] = m;
        const d = declared.get(name);
        const stated = d && statedDefault(aside);
        if (!d || !stated) continue;
        const line = text.slice(0, m.index).split('\n').length;
        const where = `${file}:${line} says ${name} (${aside})`;
        if ('required' in stated) assert.equal(d.required, true, where);
        else if ('text' in stated) assert.equal(String(d.default), stated.text, where);
        else assert.equal(Number(d.default), stated.number, `${where}; declared ${d.default}`);
        checked++;
      }
    });
  }
  test('the defaults the docs state were found and checked', () => {
    assert.ok(checked >= 15, `${checked} checked`);
  });
});

describe('the docs speak of the project, not of its tracker', () => {
  // A ticket's number means nothing to a reader of the repository; what it asked for is said in
  // words. An upstream project's issue is cited by its link, which the check leaves alone.
  const TICKET = /\bissues?\s+#?\d+\b|\btickets?\b|(?<![\w/#&-])#\d+\b/gi;

  test('the check finds what it looks for', () => {
    const found = (/** @type {string} */ t) =>
      [...t.replace(/\]\([^)]*\)/g, ']').matchAll(TICKET)].map((m) => m[0]);
    assert.deepEqual(
      found(
        'issue 26 asked; see #34; the ticket; [reported](https://github.com/o/r/issues/228); a known issue; colour #fff',
      ),
      ['issue 26', '#34', 'ticket'],
    );
  });

  // CHANGELOG.md is left out: it is history, and a release line may name what it closed.
  for (const file of ['README.md', ...DOCS]) {
    test(`${file}: no issue or ticket number`, () => {
      const prose = read(file)
        .replace(/\]\([^)]*\)/g, ']')
        .replace(/https?:\/\/\S+/g, '');
      const hits = [...prose.matchAll(TICKET)].map(
        (m) => `line ${prose.slice(0, m.index).split('\n').length}: ${m[0]}`,
      );
      assert.deepEqual(hits, []);
    });
  }

  // The code's comments and test names too: a reader of a test should not need the tracker to know
  // what it guards. Only `issue N` is looked for there (a `#1` is a round's name in a bench).
  const CODE_DIRS = ['service', 'lambda', 'db', 'env', 'bench', 'k6', 'scripts', 'test', '.ci'];
  const ISSUE = /\bissues?\s+#?\d+\b/gi;
  const SELF = path.relative(root, fileURLToPath(import.meta.url));
  /** @param {string} dir @returns {string[]} the JavaScript and shell files under it, from the root */
  const codeFiles = (dir) =>
    readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
      const file = path.join(dir, e.name);
      if (e.isDirectory())
        return e.name === 'node_modules' ||
          e.name === 'results' ||
          (e.name.startsWith('.') && e.name !== '.ci')
          ? []
          : codeFiles(file);
      return /\.(m?js|sh|ya?ml|sql)$/.test(e.name) || dir === '.ci' ? [file] : [];
    });
  test('the code names no issue number', () => {
    const files = CODE_DIRS.flatMap(codeFiles).filter((f) => f !== SELF);
    assert.ok(files.length > 200, `${files.length} files read`);
    const hits = files.flatMap((file) =>
      [...read(file).matchAll(ISSUE)].map((m) => `${file}: ${m[0]}`),
    );
    assert.deepEqual(hits, []);
  });
});
