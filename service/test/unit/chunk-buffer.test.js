import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ChunkBuffer } from '../../src/users/chunk-buffer.js';

test('a chunk holds the UTF-8 of every piece appended, each view those bytes, whatever it had to grow to', () => {
  fc.assert(
    fc.property(
      fc.array(fc.string({ unit: 'binary', maxLength: 40 }), { maxLength: 30 }),
      fc.integer({ min: 1, max: 64 }),
      (pieces, initial) => {
        const chunk = new ChunkBuffer(initial);
        const views = pieces.map((p) => chunk.append(p));
        assert.deepEqual(
          views.map((v) => v.toString()),
          pieces.map((p) => Buffer.from(p).toString()),
        );
        assert.deepEqual(chunk.bytes(), Buffer.from(pieces.join('')));
      },
    ),
  );
});

test('clear() empties it and the next chunk reuses its memory', () => {
  const chunk = new ChunkBuffer(16);
  chunk.append('a,b,c,d\n');
  const { buffer } = chunk;
  chunk.clear();
  assert.equal(chunk.bytes().length, 0);
  assert.equal(chunk.append('é,f\n').toString(), 'é,f\n');
  assert.equal(chunk.buffer, buffer, 'no new allocation for a chunk that fits');
});
