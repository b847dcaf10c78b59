// ElasticMQ's first fetch through Maven, with a stand-in `mvn` on PATH: nothing of Maven's colour
// codes reaches the terminal, and a failure shows what Maven said, plain.
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runNode } from '../../../test/support/child-process.js';

const ELASTICMQ = new URL('../../local/elasticmq/elasticmq.js', import.meta.url).href;

describe('ensureElasticMQ (unit, a stand-in mvn)', () => {
  /** @type {string} */
  let dir;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-mvn-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** Runs ensureElasticMQ with `script` as mvn, in an empty cache. @param {string} name @param {string} script */
  async function fetchWith(name, script) {
    const bin = path.join(dir, name, 'bin');
    await mkdir(bin, { recursive: true });
    await writeFile(path.join(bin, 'mvn'), script);
    await chmod(path.join(bin, 'mvn'), 0o755);
    const env = {
      ...process.env,
      PATH: `${bin}${path.delimiter}${process.env.PATH}`,
      XDG_CACHE_HOME: path.join(dir, name, 'cache'),
    };
    const run = runNode(
      [
        '--input-type=module',
        '-e',
        `import { ensureElasticMQ } from ${JSON.stringify(ELASTICMQ)}; try { ensureElasticMQ(); } catch (err) { console.error('thrown: ' + err.message); }`,
      ],
      { env },
    );
    await run.exited;
    return run.out() + run.err();
  }

  test('a fetch that works says one line, no escape code', async () => {
    // What Debian's Maven 3.8 writes in quiet batch mode: four colour resets; then the jars.
    const output = await fetchWith(
      'works',
      `#!/bin/sh
printf '\\033[0m\\033[0m\\033[0m\\033[0m'
for arg; do case "$arg" in -DoutputDirectory=*) mkdir -p "\${arg#*=}" && touch "\${arg#*=}/elasticmq-server_2.13-1.7.1.jar";; esac; done
`,
    );
    assert.ok(!output.includes('\x1b'), JSON.stringify(output));
    assert.match(output, /^fetching ElasticMQ [\d.]+ from Maven Central into .+ \(once\)\.\.\.\n$/);
  });

  test('a fetch that fails shows what Maven said, plain, and why', async () => {
    const output = await fetchWith(
      'fails',
      `#!/bin/sh
printf '\\033[1;31m[ERROR]\\033[m Could not resolve dependencies: network is unreachable\\n' >&2
exit 1
`,
    );
    assert.ok(!output.includes('\x1b'), JSON.stringify(output));
    assert.match(output, /\[ERROR\] Could not resolve dependencies: network is unreachable\n/);
    assert.match(output, /thrown: could not fetch ElasticMQ with Maven \(exit 1\)/);
  });
});
