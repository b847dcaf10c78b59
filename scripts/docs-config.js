#!/usr/bin/env node
// `npm run docs:config`: writes docs/configuration.md from the declarations of every component.
import { writeFileSync } from 'node:fs';
import { createCommand } from '@sluice/db/command-line';

createCommand(
  'npm run docs:config --',
  'Writes docs/configuration.md from the variables each component declares ' +
    '(service/src/config.js, db/src/database-url.js, lambda/src/config.js, ' +
    'lambda/src/rotate-token.js, lambda/local/sqs-config.js, scripts/start-config.js, ' +
    'env/src/tracing.js). test/unit/configuration-doc.test.js fails while the file differs.',
).parse();
const { configurationDoc } = await import('./configuration-doc.js');

const file = new URL('../docs/configuration.md', import.meta.url);
writeFileSync(file, configurationDoc());
console.log('wrote docs/configuration.md');
