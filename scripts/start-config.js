import { DATABASE_VARIABLES, MIGRATION_VARIABLES } from '@sluice/db/database-url';
import { defineVariables, integer } from '@sluice/env';
import { SERVICE_VARIABLES } from '../service/src/config.js';

/** What `npm start` reads itself; it passes every variable on to the service, which reads the rest. */
export const START_VARIABLES = defineVariables({
  EMBEDDED_PG_PORT: { parser: integer({ min: 1, max: 65535 }), defaultText: 'a free port', description: "the embedded PostgreSQL's port, when DATABASE_URL is unset" },
});

/** Every variable `npm start` and the service it starts read, for its --help. */
export const START_AND_SERVICE_VARIABLES = { ...START_VARIABLES, ...MIGRATION_VARIABLES, ...DATABASE_VARIABLES, ...SERVICE_VARIABLES };
