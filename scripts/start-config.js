import { DATABASE_VARIABLES, MIGRATION_VARIABLES } from '@sluice/db/database-url';
import { ConfigError, defineVariables, integer, loadEnv, text } from '@sluice/env';
import { SERVICE_VARIABLES, loadConfig } from '../service/src/config.js';

/** What `npm start` reads itself; it passes every variable on to the service, which reads the rest. */
export const START_VARIABLES = defineVariables({
  EMBEDDED_PG_PORT: { parser: integer({ min: 1, max: 65535 }), defaultText: 'a free port', description: "the embedded PostgreSQL's port, when DATABASE_URL is unset" },
  EMBEDDED_PG_DIR: {
    parser: text(),
    default: '.data/postgres',
    description: "the embedded PostgreSQL's data directory (a relative one is in the repository), kept across runs, when DATABASE_URL is unset; one `npm start` at a time uses it",
  },
});

/** Every variable `npm start` and the service it starts read, for its --help. */
export const START_AND_SERVICE_VARIABLES = { ...START_VARIABLES, ...MIGRATION_VARIABLES, ...DATABASE_VARIABLES, ...SERVICE_VARIABLES };

/**
 * Every variable of `npm start` and of the service it starts (the tracing ones too), checked
 * before anything starts: a bad one in each layer is named in the same message, not one per run.
 * @param {NodeJS.ProcessEnv} [env]
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
  if (!start || !service || problems.length) throw new ConfigError(problems[0].variable, problems[0].problem, problems);
  return { embeddedPort: start.EMBEDDED_PG_PORT, embeddedDir: start.EMBEDDED_PG_DIR, migrationUrl: migration?.DIRECT_DATABASE_URL, service };
}
