// The configuration cannot drift: docs/configuration.md is the text made from the declarations, and
// no source reads a variable that no declaration names (so --help and the doc list it too).
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { SECTIONS, configurationDoc } from '../../scripts/configuration-doc.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
// Where the components and their commands live; tests and benchmarks read variables of their own.
const SOURCE_DIRS = ['env/src', 'db/src', 'service/src', 'lambda/src', 'lambda/local', 'scripts'];
// Variables read that are the machine's, not sluice's configuration.
const NOT_CONFIGURATION = new Set([
  'XDG_CACHE_HOME', // where the tools fetched once (ElasticMQ, compose) are cached
]);

/**
 * Every `env.NAME`, `process.env.NAME` or `env['NAME']` read in the sources that no declaration names.
 * @param {{ file: string, text: string }[]} sources @param {Set<string>} declared
 * @returns {string[]}  "file: NAME"
 */
function undeclaredReads(sources, declared) {
  return sources.flatMap(({ file, text }) =>
    [...text.matchAll(/\benv(?:\.([A-Z][A-Z0-9_]*)\b|\[\s*['"`]([A-Z][A-Z0-9_]*)['"`]\s*\])/g)]
      .map((m) => m[1] ?? m[2])
      .filter((name) => !declared.has(name) && !NOT_CONFIGURATION.has(name))
      .map((name) => `${file}: ${name}`),
  );
}

const declared = new Set(SECTIONS.flatMap((s) => Object.keys(s.declarations)));
const sources = SOURCE_DIRS.flatMap((dir) =>
  readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.js') && !f.split(path.sep).includes('node_modules'))
    .map((f) => ({ file: path.join(dir, f), text: readFileSync(path.join(root, dir, f), 'utf8') })),
);

describe('the configuration doc and the declarations (unit)', () => {
  test('docs/configuration.md is what `npm run docs:config` makes from the declarations', () => {
    assert.equal(
      readFileSync(path.join(root, 'docs', 'configuration.md'), 'utf8'),
      configurationDoc(),
      'run npm run docs:config',
    );
  });

  test('a variable added to a declaration changes the doc, so the file above no longer matches', () => {
    const [first, ...rest] = SECTIONS;
    const added = {
      ...first,
      declarations: {
        ...first.declarations,
        NEW_KNOB: { parser: first.declarations.PGHOST.parser, description: 'new' },
      },
    };
    assert.match(configurationDoc([added, ...rest]), /\| `NEW_KNOB` \| unset \| text \| new \|/);
    assert.notEqual(configurationDoc([added, ...rest]), configurationDoc());
  });

  test('no source reads a variable that no declaration names', () => {
    assert.ok(
      sources.length > 30 &&
        sources.some((s) => s.file === path.join('service', 'src', 'config.js')),
    );
    assert.deepEqual(undeclaredReads(sources, declared), []);
  });

  test('a read of an undeclared variable is found, however it is spelled', () => {
    const text =
      "const a = process.env.NEW_KNOB; const b = env['OTHER_KNOB']; const c = env.PORT; const d = env[name];";
    assert.deepEqual(undeclaredReads([{ file: 'x.js', text }], declared), [
      'x.js: NEW_KNOB',
      'x.js: OTHER_KNOB',
    ]);
  });
});
