// The CSV of one chunk of a streamed import, kept until the chunk is in users, in one buffer reused
// from chunk to chunk (a Buffer a piece left freed memory in glibc's arenas; docs/benchmarks.md).

export class ChunkBuffer {
  /** @param {number} initialBytes */
  constructor(initialBytes) {
    this.buffer = Buffer.allocUnsafe(initialBytes);
    this.length = 0;
  }

  /** Appends the text's UTF-8; a view of those bytes, valid until clear(). @param {string} text */
  append(text) {
    const needed = this.length + Buffer.byteLength(text);
    if (needed > this.buffer.length) {
      // A view handed out before still points into the old buffer, which stays alive as long as it.
      const grown = Buffer.allocUnsafe(Math.max(needed, this.buffer.length * 2));
      this.buffer.copy(grown, 0, 0, this.length);
      this.buffer = grown;
    }
    const start = this.length;
    this.length += this.buffer.write(text, start);
    return this.buffer.subarray(start, this.length);
  }

  /** Every byte appended since clear(), as a view. */
  bytes() {
    return this.buffer.subarray(0, this.length);
  }

  /** Empties it, for the next chunk: the views handed out must no longer be in use. */
  clear() {
    this.length = 0;
  }
}
