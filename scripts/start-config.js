import { readFileSync, statSync } from 'node:fs';
import { DATABASE_VARIABLES, MIGRATION_VARIABLES } from '@sluice/db/database-url';
import { ConfigError, defineVariables, integer, loadEnv, text } from '@sluice/env';
import { parseNamedTokens } from '@sluice/env/named-tokens';
import { SERVICE_VARIABLES, loadConfig } from '../service/src/config.js';

/**
 * What `npm start` reads itself; it passes every variable on to the service, which reads the rest.
 */
export const START_VARIABLES = defineVariables({
  EMBEDDED_PG_PORT: {
    parser: integer({ min: 1, max: 65535 }),
    defaultText: 'a free port',
    description: "the embedded PostgreSQL's port, when DATABASE_URL is unset",
  },
  EMBEDDED_PG_DIR: {
    parser: text(),
    default: '.data/postgres',
    description:
      "the embedded PostgreSQL's data directory (a relative one is in the repository), " +
      'kept across runs, when DATABASE_URL is unset; one `npm start` at a time uses it',
  },
});

/** Every variable `npm start` and the service it starts read, for its --help. */
export const START_AND_SERVICE_VARIABLES = {
  ...START_VARIABLES,
  ...MIGRATION_VARIABLES,
  ...DATABASE_VARIABLES,
  ...SERVICE_VARIABLES,
};

/** What a file must hold, by its variable: a reader throws a TypeError that follows the name. */
const FILE_CONTENTS = /** @type {Record<string, (text: string) => unknown>} */ ({
  INGEST_TOKENS_FILE: parseNamedTokens,
});
/** @type {Record<string, string>} */
const FILE_PROBLEMS = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  ELOOP: 'too many symbolic links',
  ENOTDIR: 'a part of its path is no directory',
};

/**
 * The files the *_FILE variables name, read now as the service will, so a bad one is said before
 * the embedded PostgreSQL starts.
 * @param {NodeJS.ProcessEnv} env
 * @returns {import('@sluice/env/load-env').Problem[]}
 */
export function fileProblems(env) {
  return Object.keys(START_AND_SERVICE_VARIABLES)
    .filter((name) => name.endsWith('_FILE') && env[name]?.trim())
    .flatMap((variable) => {
      const file = /** @type {string} */ (env[variable]).trim();
      try {
        if (!statSync(file).isFile())
          return [{ variable, problem: `names ${file}, which is not a regular file` }];
        FILE_CONTENTS[variable]?.(readFileSync(file, 'utf8'));
        return [];
      } catch (err) {
        if (err instanceof TypeError) return [{ variable, problem: err.message }];
        const code = /** @type {NodeJS.ErrnoException} */ (err).code ?? '';
        return [
          {
            variable,
            problem: `names a file that cannot be read: ${file} (${FILE_PROBLEMS[code] ?? code})`,
          },
        ];
      }
    });
}

/**
 * Every variable of `npm start` and of its service (tracing's too) and the files they name, checked
 * before anything starts: every problem in one message. @param {NodeJS.ProcessEnv} [env]
 */
export function loadStartConfig(env = process.env) {
  /** @type {import('@sluice/env/load-env').Problem[]} */
  const problems = [];
  /** @template T @param {() => T} load @returns {T | undefined} */
  const attempt = (load) => {
    try {
      return load();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems.push(...err.problems);
      return undefined;
    }
  };
  const start = attempt(() => loadEnv(START_VARIABLES, env));
  const migration = attempt(() => loadEnv(MIGRATION_VARIABLES, env));
  // The service's configuration holds tracing's OTEL_ variables too.
  const service = attempt(() => loadConfig(env));
  problems.push(...fileProblems(env));
  if (!start || !service || problems.length)
    throw new ConfigError(problems[0].variable, problems[0].problem, problems);
  return {
    embeddedPort: start.EMBEDDED_PG_PORT,
    embeddedDir: start.EMBEDDED_PG_DIR,
    migrationUrl: migration?.DIRECT_DATABASE_URL,
    service,
  };
}
