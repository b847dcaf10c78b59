// The layers of service/src as docs/architecture.md's table declares them, checked against every
// import statement: nothing from a layer to one its row does not name (so nothing upwards, nothing
// from users/ to http/), and no cycle in the import graph.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import ts from 'typescript';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SRC = path.join(ROOT, 'src');

/** The table under "## Layers": each layer's entries (files, or folders ending in /), what it may import, and the default layer. */
function layerTable() {
  const doc = readFileSync(path.join(ROOT, '../docs/architecture.md'), 'utf8');
  const section = doc.slice(
    doc.indexOf('## Layers'),
    doc.indexOf('\n## ', doc.indexOf('## Layers') + 1),
  );
  const rows = section
    .split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('| layer') && !l.startsWith('| ---'));
  return rows.map((row) => {
    const [name, files, mayImport] = row
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    return {
      name,
      entries: [...files.matchAll(/`([^`]+)`/g)].map((m) => m[1]),
      fallback: files.startsWith('every other file'),
      mayImport: mayImport.split(',').map((l) => l.trim()),
    };
  });
}

/** The layer of the longest entry that names `file`, else the fallback's. @param {ReturnType<typeof layerTable>} layers @param {string} file  relative to service/src */
function layerOf(layers, file) {
  let best = {
    name: /** @type {{ name: string }} */ (layers.find((l) => l.fallback)).name,
    length: -1,
  };
  for (const layer of layers) {
    for (const entry of layer.entries) {
      const names = entry.endsWith('/') ? file.startsWith(entry) : file === entry;
      if (names && entry.length > best.length) best = { name: layer.name, length: entry.length };
    }
  }
  return best.name;
}

/** Every .js file under service/src, relative to it, with the files of service/src it imports. */
function importGraph() {
  /** @type {Map<string, string[]>} */
  const graph = new Map();
  for (const entry of readdirSync(SRC, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.js')) continue;
    const file = path.relative(SRC, path.join(entry.parentPath, entry.name));
    const text = readFileSync(path.join(SRC, file), 'utf8');
    const imported = ts
      .preProcessFile(text, true, true)
      .importedFiles.map((f) => f.fileName)
      .filter((name) => name.startsWith('.'))
      .map((name) => path.relative(SRC, path.resolve(SRC, path.dirname(file), name)))
      .filter((target) => !target.startsWith('..'));
    graph.set(
      file.split(path.sep).join('/'),
      imported.map((t) => t.split(path.sep).join('/')),
    );
  }
  return graph;
}

/** @param {Map<string, string[]>} graph @returns {string[] | undefined} a cycle, its first file repeated at its end */
export function findCycle(graph) {
  /** @type {Map<string, 'open' | 'done'>} */
  const state = new Map();
  /** @type {string[]} */
  const stack = [];
  /** @param {string} file @returns {string[] | undefined} */
  const visit = (file) => {
    if (state.get(file) === 'done') return undefined;
    if (state.get(file) === 'open') return [...stack.slice(stack.indexOf(file)), file];
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    stack.pop();
    state.set(file, 'done');
    return undefined;
  };
  for (const file of graph.keys()) {
    const cycle = visit(file);
    if (cycle) return cycle;
  }
  return undefined;
}

describe('the layers of service/src', () => {
  const layers = layerTable();
  const graph = importGraph();

  test('architecture.md declares the layers, one of them for every other file', () => {
    assert.deepEqual(
      layers.map((l) => l.name),
      ['entry', 'composition', 'http', 'domain', 'database', 'shared'],
    );
    assert.equal(layers.filter((l) => l.fallback).length, 1);
    assert.ok(graph.size > 50, `${graph.size} files read`);
  });

  test('every import goes to its own layer or one its row names', () => {
    const wrong = [];
    for (const [file, imports] of graph) {
      const from = layerOf(layers, file);
      const allowed = /** @type {ReturnType<typeof layerTable>[number]} */ (
        layers.find((l) => l.name === from)
      ).mayImport;
      for (const target of imports) {
        const to = layerOf(layers, target);
        if (to !== from && !allowed.includes(to))
          wrong.push(`${file} (${from}) imports ${target} (${to})`);
      }
    }
    assert.deepEqual(wrong, []);
  });

  test('nothing in users/ imports http/', () => {
    const wrong = [...graph].flatMap(([file, imports]) =>
      file.startsWith('users/')
        ? imports.filter((t) => t.startsWith('http/')).map((t) => `${file} imports ${t}`)
        : [],
    );
    assert.deepEqual(wrong, []);
  });

  test('the import graph has no cycle', () => {
    assert.equal(findCycle(graph)?.join(' → '), undefined);
  });

  test('a cycle is found when there is one', () => {
    assert.deepEqual(
      findCycle(
        new Map([
          ['a.js', ['b.js']],
          ['b.js', ['c.js']],
          ['c.js', ['a.js']],
        ]),
      ),
      ['a.js', 'b.js', 'c.js', 'a.js'],
    );
    assert.equal(
      findCycle(
        new Map([
          ['a.js', ['b.js']],
          ['b.js', []],
        ]),
      ),
      undefined,
    );
  });
});
