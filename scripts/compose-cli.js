import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export const COMPOSE_VERSION = 'v2.40.3';
const CACHE = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'sluice');
const BIN = path.join(CACHE, 'bin', `docker-compose-${COMPOSE_VERSION}`);

// A module of our own that requires compose and repeats compose's own `exclude` directives, which
// `go install pkg@version` would ignore (and then fail on).
const GO_MOD = `module sluice.local/compose-cli

go 1.24

require github.com/docker/compose/v2 ${COMPOSE_VERSION}

exclude (
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2
)
`;

/**
 * A command that runs `docker compose`: the Docker CLI's plugin when it has one, else the compose
 * CLI built once from the Go module proxy into ~/.cache/sluice (about 4 minutes).
 * @param {{ log?: (m: string) => void }} [options]
 * @returns {Promise<string[]>} argv prefix
 */
export async function findComposeCli({ log = (m) => console.error(m) } = {}) {
  if (spawnSync('docker', ['compose', 'version'], { stdio: 'ignore' }).status === 0)
    return ['docker', 'compose'];
  if (existsSync(BIN)) return [BIN];
  if (spawnSync('go', ['version'], { stdio: 'ignore' }).status !== 0) {
    throw new Error(
      'no `docker compose` and no Go to build it: install Docker with the compose plugin, or Go',
    );
  }
  const dir = path.join(CACHE, 'compose-cli-build');
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, 'go.mod'), GO_MOD);
  log(
    `building the compose CLI ${COMPOSE_VERSION} once from the Go module proxy (a few minutes)...`,
  );
  /** @param {string[]} args */
  const go = (args) =>
    new Promise((resolve) =>
      spawn('go', args, { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'] }).on('exit', resolve),
    );
  if (
    (await go(['get', `github.com/docker/compose/v2/cmd@${COMPOSE_VERSION}`])) !== 0 ||
    (await go(['build', '-o', BIN, 'github.com/docker/compose/v2/cmd'])) !== 0
  ) {
    throw new Error(`building the compose CLI ${COMPOSE_VERSION} failed`);
  }
  return [BIN];
}
