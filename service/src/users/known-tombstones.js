// The tombstones a process has read: their tags, sorted for a binary search, and the generation of
// the last erasure read. A write's email whose tag is not here was never erased, as of that
// generation; one whose tag is here may have been (tags collide), and the database decides.

export class KnownTombstones {
  /** The last erasure read (0: none). */
  generation = 0;
  #tags = new Int32Array(0);

  /** @param {number} tag */
  has(tag) {
    const tags = this.#tags;
    let low = 0;
    let high = tags.length - 1;
    while (low <= high) {
      const mid = (low + high) >>> 1;
      if (tags[mid] === tag) return true;
      if (tags[mid] < tag) low = mid + 1;
      else high = mid - 1;
    }
    return false;
  }

  /**
   * Tombstones read since, and the generation read up to.
   * @param {number} generation @param {readonly number[]} tags
   */
  absorb(generation, tags) {
    if (generation > this.generation) this.generation = generation;
    if (tags.length === 0) return;
    const merged = new Int32Array(this.#tags.length + tags.length);
    merged.set(this.#tags);
    merged.set(tags, this.#tags.length);
    this.#tags = merged.sort();
  }

  get size() {
    return this.#tags.length;
  }
}
