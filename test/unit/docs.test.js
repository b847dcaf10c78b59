// The docs stay true: every relative link and anchor in README.md, CHANGELOG.md, bench/log.md and
// docs/*.md leads to a file and a heading that exist, and every `npm run X` they name is a script of
// package.json.
// (The variables of docs/configuration.md are checked against the code by a test of their own.)
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import GithubSlugger from 'github-slugger';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DOCS = [
  'README.md',
  'CHANGELOG.md',
  'bench/log.md',
  ...readdirSync(path.join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** @param {string} file a path from the root @returns {string} */
const read = (file) => readFileSync(path.join(root, file), 'utf8');

/**
 * The prose of a Markdown file, without its fenced code blocks (a `# comment` in a shell example
 * is no heading, and a link-like text in code is no link).
 * @param {string} markdown @returns {string}
 */
function withoutFences(markdown) {
  let fence = '';
  return markdown
    .split('\n')
    .filter((line) => {
      const marker = /^\s*(```|~~~)/.exec(line)?.[1];
      if (marker && (!fence || fence === marker)) {
        fence = fence ? '' : marker;
        return false;
      }
      return !fence;
    })
    .join('\n');
}

/**
 * The anchors GitHub gives a file's headings: its slugger, duplicates numbered.
 * @param {string} markdown @returns {Set<string>}
 */
export function anchorsOf(markdown) {
  const slugger = new GithubSlugger();
  const anchors = new Set();
  for (const line of withoutFences(markdown).split('\n')) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    // GitHub slugs the heading's text: the backticks of inline code are not part of it.
    if (heading !== undefined) anchors.add(slugger.slug(heading.replace(/`/g, '')));
  }
  return anchors;
}

/**
 * Every inline link and image of the prose, `[text](target)` and `![alt](target)`; inline code
 * spans are left out first, so `` `a[i](x)` `` is not taken for one.
 * @param {string} markdown @returns {{ target: string, line: number }[]}
 */
export function linksOf(markdown) {
  // A code span may go on over a line break; its newlines are kept, so line numbers stay right.
  const prose = withoutFences(markdown).replace(/`[^`]+`/g, (code) => code.replace(/[^\n]/g, ' '));
  return [...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => ({
    target: m[1],
    line: prose.slice(0, m.index).split('\n').length,
  }));
}

/**
 * What a link to a file of this repository fails to reach, or undefined when it reaches it.
 * @param {string} from the linking file, from the root @param {string} target @returns {string | undefined}
 */
export function brokenLink(from, target) {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // http:, https:, mailto: are not ours to check here
  const [file, anchor] = target.split('#', 2);
  const resolved = file
    ? path.normalize(path.join(path.dirname(from), decodeURIComponent(file)))
    : from;
  if (resolved.startsWith('..') || path.isAbsolute(resolved))
    return `${target} leaves the repository`;
  if (!existsSync(path.join(root, resolved))) return `${target}: no file ${resolved}`;
  if (anchor === undefined) return undefined;
  if (!resolved.endsWith('.md') || statSync(path.join(root, resolved)).isDirectory())
    return `${target}: an anchor into a file that is not Markdown`;
  if (!anchorsOf(read(resolved)).has(anchor))
    return `${target}: no heading of ${resolved} has the anchor #${anchor}`;
  return undefined;
}

/**
 * Every `npm run name` a text names (the name may be split from `run` by a line break). Script
 * names are lower-case; `npm run X` in capitals is a placeholder in prose.
 * @param {string} markdown @returns {string[]}
 */
export function npmRunsOf(markdown) {
  return [...markdown.matchAll(/\bnpm\s+run\s+([a-z0-9][a-z0-9:._-]*)/g)].map((m) => m[1]);
}

describe('the docs', () => {
  const scripts = Object.keys(JSON.parse(read('package.json')).scripts);

  test('README.md is a page a newcomer reads in five minutes: at most 200 lines', () => {
    assert.ok(read('README.md').split('\n').length <= 200);
  });

  for (const file of DOCS) {
    test(`${file}: every relative link and anchor resolves`, () => {
      const broken = linksOf(read(file)).flatMap(({ target, line }) => {
        const why = brokenLink(file, target);
        return why ? [`${file}:${line}: ${why}`] : [];
      });
      assert.deepEqual(broken, []);
    });

    test(`${file}: every npm run names a script of package.json`, () => {
      const unknown = npmRunsOf(read(file)).filter((name) => !scripts.includes(name));
      assert.deepEqual([...new Set(unknown)], []);
    });
  }

  test('the checks find what they look for', () => {
    const sample =
      '# A `b` c\n\n## A b c\n\n```sh\n# not a heading [x](nowhere.md)\n```\n\n[d](#a-b-c-1) `[e](f.md)` ![g](docs/bench.svg)\nnpm run\nbench:db, npm run X';
    assert.deepEqual([...anchorsOf(sample)], ['a-b-c', 'a-b-c-1']);
    assert.deepEqual(
      linksOf(sample).map((l) => l.target),
      ['#a-b-c-1', 'docs/bench.svg'],
    );
    assert.deepEqual(npmRunsOf(sample), ['bench:db']);
    assert.equal(brokenLink('README.md', 'docs/bench.svg'), undefined);
    assert.match(String(brokenLink('README.md', 'docs/nowhere.md')), /no file docs\/nowhere\.md/);
    assert.match(String(brokenLink('README.md', 'docs/api.md#nowhere')), /no heading .* #nowhere/);
    assert.equal(brokenLink('docs/api.md', 'https://example.com/x.md#y'), undefined);
  });
});
