// npm start's warning on a Node older than sluice needs (scripts/node-version.js): the version it
// names is the one package.json's "engines" and .nvmrc name.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { NODE_NEEDED, nodeVersionWarning } from '../../scripts/node-version.js';

const read = (/** @type {string} */ file) =>
  readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');

test("the version needed is package.json's engines and .nvmrc's", () => {
  assert.equal(JSON.parse(read('package.json')).engines.node, `>=${NODE_NEEDED}`);
  assert.equal(read('.nvmrc').trim(), String(NODE_NEEDED));
});

test('older than needed: a warning naming both versions; as new or newer: none', () => {
  assert.match(
    nodeVersionWarning('20.11.1') ?? '',
    /^sluice: warning: Node 20\.11\.1 is older than Node 22, which sluice needs/,
  );
  assert.match(nodeVersionWarning('18.0.0') ?? '', /install Node 22/);
  assert.equal(nodeVersionWarning('22.0.0'), undefined);
  assert.equal(nodeVersionWarning('24.1.0'), undefined);
});
