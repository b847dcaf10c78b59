// ESLint over the whole tree; `npm run lint` runs it beside tsc and allows no warning.
// The rule sets such a project uses: @eslint/js for JavaScript, eslint-plugin-n for Node,
// eslint-plugin-promise, eslint-plugin-jsdoc for the JSDoc types tsc checks. Every rule switched off
// or changed says why, next to it.
//
// typescript-eslint's type-aware rules are not here. Tried over the files of jsconfig.json (its
// recommendedTypeCheckedOnly set): 465 findings, 381 of them no-unsafe-* on `any`, which tsc allows
// here on purpose (noImplicitAny is off; parsed JSON and a few third-party shapes are `any`), and 60
// of the 66 no-floating-promises were node:test's describe()/test(), which need no await. They also
// need every linted file in a TypeScript program, and the workspaces' tests and k6/ are not in one.
// Worth it once the types are tightened (noImplicitAny on), not before.
import { readFileSync } from 'node:fs';
import js from '@eslint/js';
import jsdoc from 'eslint-plugin-jsdoc';
import n from 'eslint-plugin-n';
import promise from 'eslint-plugin-promise';
import globals from 'globals';

// The Node versions the project supports, from the root package.json: the workspaces' own
// package.json files declare none, and eslint-plugin-n would otherwise assume Node 16 for them.
const { engines } = JSON.parse(readFileSync(new URL('package.json', import.meta.url), 'utf8'));
// The tests run on the Node of .nvmrc (CI's), which may be newer than the oldest supported one.
const testedNode = `>=${readFileSync(new URL('.nvmrc', import.meta.url), 'utf8').trim()}`;

// Commands, run as `node FILE` (npm scripts, Dockerfiles, the tests): they end with an exit code on
// purpose (2 for a usage error, the test runner's child's code, the service's after its drain).
const COMMANDS = [
  'scripts/*.js',
  'bench/*.js',
  'bench/naive/server.js',
  'bench/noop/server.js',
  'service/src/server.js',
  'service/src/main.js',
  'service/src/cluster.js',
  'db/src/migrate-cli.js',
  'db/src/command-line.js',
  'lambda/local/bin/*.js',
  'test/support/refuse-to-start.js',
];
// Those that start with a shebang. eslint-plugin-n matches them from the nearest package.json, the
// workspace's for service/, db/ and lambda/local/, hence the leading `**/`.
const EXECUTABLES = [
  ...['docs-config', 'format', 'fuzz', 'lint', 'start', 'test'].map((name) => `scripts/${name}.js`),
  'bench/*.js',
  'bench/naive/server.js',
  'bench/noop/server.js',
  '**/src/server.js',
  '**/src/migrate-cli.js',
  '**/bin/*.js',
];

export default [
  {
    // What git ignores, and what a run leaves behind.
    ignores: ['**/node_modules/', '.data/', '.cache/', 'coverage/', 'bench/results/', '.aws-sam/'],
  },
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },
  js.configs.recommended,
  n.configs['flat/recommended-module'],
  promise.configs['flat/recommended'],
  jsdoc.configs['flat/recommended-typescript-flavor'],
  {
    languageOptions: { ecmaVersion: 2024, sourceType: 'module', globals: { ...globals.node } },
    settings: { node: { version: engines.node } },
    rules: {
      // `_` names what is there but unused (a skipped argument, a field left out of a rest object).
      'no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],

      // The root package's scripts, benchmarks and tests use the workspaces (@sluice/*) and their
      // dependencies, which npm installs at the root; each workspace's own imports are still checked.
      'n/no-extraneous-import': [
        'error',
        {
          allowModules: [
            '@sluice/db',
            '@sluice/env',
            '@sluice/lambda',
            '@aws-sdk/client-sqs',
            'pg',
            'pg-format',
            'pg-copy-streams',
            'express',
            'ajv',
            'jose',
            '@opentelemetry/api',
          ],
        },
      ],
      // Features still flagged experimental on the oldest supported Node (fetch, mock timers,
      // fs.cpSync) are used on purpose, and the tests run on it; a feature it lacks still fails.
      'n/no-unsupported-features/node-builtins': ['error', { allowExperimental: true }],
      'n/hashbang': ['error', { additionalExecutables: EXECUTABLES }],

      // `new Promise((r) => setTimeout(r, ms))`, and `_` when only reject is used.
      'promise/param-names': ['error', { resolvePattern: '^(_|_?resolve|r)$' }],
      // `.then(onFulfilled, onRejected)` handles the rejection.
      'promise/catch-or-return': ['error', { allowThen: true }],
      // The last `.then` of a chain has nothing to hand on.
      'promise/always-return': ['error', { ignoreLastCallback: true }],
      // Express middleware continues by calling `next`, also once a promise has settled.
      'promise/no-callback-in-promise': ['error', { exceptions: ['next'] }],

      // JSDoc here carries the types tsc checks, not prose for a documentation generator: a name
      // that says what it is needs no description, tsc infers what a function returns or yields,
      // and a comment says why where the code cannot.
      'jsdoc/require-jsdoc': 'off',
      'jsdoc/require-param': 'off',
      'jsdoc/require-param-description': 'off',
      'jsdoc/require-property-description': 'off',
      'jsdoc/require-returns': 'off',
      'jsdoc/require-returns-description': 'off',
      'jsdoc/require-yields': 'off',
      // Short types go on one line, several tags together (`@param {T} a @returns {U}`), which tsc
      // reads; the plugin's parser takes tags only at the start of a line, so it sees the later ones
      // as inline tags and parameters missing. tsc checks parameter names itself (TS8024).
      'jsdoc/escape-inline-tags': 'off',
      'jsdoc/check-param-names': 'off',
      // tsc decides what `any` may be (noImplicitAny is off); it is the honest type of parsed JSON
      // and of a few third-party shapes.
      'jsdoc/reject-any-type': 'off',
      // A blank line between a description and its tags, or none: both read well.
      'jsdoc/tag-lines': ['error', 'any', { startLines: null }],
    },
  },
  {
    // A function a screen long, its inputs few enough to name: more is an options object.
    files: ['service/src/**/*.js', 'lambda/src/**/*.js'],
    rules: {
      'max-params': ['error', 5],
      'max-lines-per-function': ['error', { max: 60 }],
    },
  },
  {
    // The OpenAPI document is object literals, one a function, read as the document they build.
    files: ['service/src/openapi.js'],
    rules: { 'max-lines-per-function': 'off' },
  },
  {
    files: ['**/test/**/*.js'],
    settings: { node: { version: testedNode } },
  },
  {
    files: COMMANDS,
    rules: { 'n/no-process-exit': 'off' },
  },
  {
    // k6 scripts run in k6's own JavaScript runtime, not Node: its globals and its modules.
    files: ['k6/**/*.js'],
    ignores: ['k6/test/**'],
    languageOptions: { globals: { __ENV: 'readonly', __VU: 'readonly', __ITER: 'readonly' } },
    rules: { 'n/no-missing-import': ['error', { allowModules: ['k6'] }] },
  },
];
