import { execFile as execFileCallback } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  statSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import dockerignore from '@balena/dockerignore';
import { DockerfileParser } from 'dockerfile-ast';

const execFile = promisify(execFileCallback);
// A CommonJS module whose types say `export default`: at run time the default import is the factory.
const createIgnore = /** @type {typeof import('@balena/dockerignore').default} */ (
  /** @type {unknown} */ (dockerignore)
);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * @typedef {object} AssembledImage
 * @property {string} workdir   the final stage's WORKDIR, as a folder of this machine
 * @property {Record<string, string>} env  the final stage's ENV
 * @property {string[]} cmd     the final stage's CMD (exec form)
 * @property {string | undefined} user
 * @property {string[]} notFetched  ADD sources from the network, which this machine cannot reach
 * @property {string[]} ran     the RUN commands, as run here
 * @property {string} base      the temporary folder holding every stage (remove it when done)
 */

/**
 * What a Dockerfile of ours puts in its final image, built without Docker: each stage is a folder,
 * COPY takes from the build context (the repository, less .dockerignore) or from an earlier stage,
 * and RUN runs npm there (with --prefer-offline, to lean on npm's cache). Any other instruction that
 * would change the files throws, so this cannot drift quietly from what Docker would build.
 * @param {string} dockerfile  path from the repository root
 */
export async function assembleImage(dockerfile) {
  const context = ROOT;
  const ignore = createIgnore().add(
    readFileSync(path.join(context, '.dockerignore'), 'utf8').split('\n'),
  );
  const parsed = DockerfileParser.parse(readFileSync(path.join(context, dockerfile), 'utf8'));
  const base = mkdtempSync(path.join(os.tmpdir(), 'sluice-image-'));
  /** @type {Map<string, string>} stage name → its root folder */
  const stages = new Map();
  /** @type {{ root: string, workdir: string, env: Record<string, string>, cmd: string[], user: string | undefined }} */
  let stage = { root: '', workdir: '/', env: {}, cmd: [], user: undefined };
  /** @type {string[]} */ const notFetched = [];
  /** @type {string[]} */ const ran = [];
  const inStage = (/** @type {string} */ p) =>
    path.join(stage.root, path.posix.resolve(stage.workdir, p));

  for (const instruction of parsed.getInstructions()) {
    const keyword = instruction.getKeyword();
    const args = instruction.getArguments().map((a) => a.getValue());
    /** @type {any[]} */
    const flagList = /** @type {any} */ (instruction).getFlags?.() ?? [];
    const flags = Object.fromEntries(flagList.map((f) => [f.getName(), f.getValue()]));
    const where = `${dockerfile}:${instruction.getRange().start.line + 1} ${keyword}`;
    switch (keyword) {
      case 'FROM': {
        const root = path.join(base, `stage-${stages.size}`);
        mkdirSync(root);
        stage = { root, workdir: '/', env: {}, cmd: [], user: undefined };
        stages.set(args[2] ?? `#${stages.size}`, root);
        break;
      }
      case 'WORKDIR':
        stage.workdir = path.posix.resolve(stage.workdir, args[0]);
        mkdirSync(inStage('.'), { recursive: true });
        break;
      case 'ENV':
        for (const pair of args) {
          const eq = pair.indexOf('=');
          if (eq < 1) throw new Error(`${where}: only the KEY=value form is understood`);
          stage.env[pair.slice(0, eq)] = pair.slice(eq + 1);
        }
        break;
      case 'COPY':
      case 'ADD': {
        const unknown = Object.keys(flags).filter((f) => !['from', 'chown', 'chmod'].includes(f));
        if (unknown.length) throw new Error(`${where}: flag --${unknown[0]} not understood`);
        const dest = args.at(-1) ?? '';
        for (const src of args.slice(0, -1)) {
          if (keyword === 'ADD' && /^https?:\/\//.test(src)) {
            notFetched.push(src);
            continue;
          }
          if (keyword === 'ADD' || /[*?[]/.test(src))
            throw new Error(`${where}: only COPY of plain paths (and ADD of a URL) are understood`);
          const target = dest.endsWith('/')
            ? path.join(inStage(dest), path.basename(src))
            : inStage(dest);
          if (flags.from) {
            const from = stages.get(flags.from);
            if (!from) throw new Error(`${where}: no earlier stage ${flags.from}`);
            cpSync(path.join(from, src), target, { recursive: true, verbatimSymlinks: true });
          } else {
            copyFromContext(context, ignore, src, target, where);
          }
        }
        break;
      }
      case 'RUN': {
        if (args[0] !== 'npm') throw new Error(`${where}: only npm is run here, not ${args[0]}`);
        const npmArgs = [...args.slice(1), '--prefer-offline'];
        ran.push(`npm ${npmArgs.join(' ')}`);
        await execFile('npm', npmArgs, {
          cwd: inStage('.'),
          env: { ...process.env, ...stage.env },
          maxBuffer: 16 * 2 ** 20,
        }).catch((/** @type {any} */ err) => {
          throw new Error(
            `${where}: npm ${npmArgs.join(' ')} failed:\n${err.stderr || err.message}`,
          );
        });
        break;
      }
      case 'CMD':
        stage.cmd = JSON.parse(/** @type {any} */ (instruction).getArgumentsContent());
        break;
      case 'USER':
        stage.user = args[0];
        break;
      case 'EXPOSE':
      case 'HEALTHCHECK':
      case 'LABEL':
        break;
      default:
        throw new Error(`${where}: not understood by this test's image assembly`);
    }
  }
  return /** @type {AssembledImage} */ ({
    workdir: inStage('.'),
    env: stage.env,
    cmd: stage.cmd,
    user: stage.user,
    notFetched,
    ran,
    base,
  });
}

/**
 * COPY from the build context: a file, or a folder's contents, leaving out what .dockerignore names.
 * @param {string} context @param {import('@balena/dockerignore').Ignore} ignore @param {string} src @param {string} target @param {string} where
 */
function copyFromContext(context, ignore, src, target, where) {
  const rel = path.posix.normalize(src).replace(/^\.?\/?/, '');
  const from = path.join(context, rel);
  if (!existsSync(from) || (rel && ignore.ignores(rel)))
    throw new Error(`${where}: ${src} is not in the build context`);
  if (!statSync(from).isDirectory()) {
    mkdirSync(path.dirname(target), { recursive: true });
    cpSync(from, target);
    return;
  }
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const entryRel = rel ? `${rel}/${entry.name}` : entry.name;
    if (ignore.ignores(entryRel)) continue;
    if (entry.isDirectory())
      copyFromContext(context, ignore, entryRel, path.join(target, entry.name), where);
    else {
      mkdirSync(target, { recursive: true });
      cpSync(path.join(from, entry.name), path.join(target, entry.name));
    }
  }
}
