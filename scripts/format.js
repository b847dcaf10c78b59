#!/usr/bin/env node
// `npm run format`: writes Prettier's layout over every JavaScript, JSON and YAML file.
import { createCommand } from '@sluice/db/command-line';

createCommand(
  'npm run format --',
  "Writes Prettier's layout (.prettierrc.json: 100 columns, single quotes) " +
    'over every JavaScript, JSON and YAML file (.prettierignore says what it ' +
    'skips); npm run lint checks it. Comments and strings are not wrapped by ' +
    'Prettier: wrap those by hand. Exits 1 when a file cannot be formatted.',
).parse();
const { prettier } = await import('./prettier.js');

process.exit(await prettier('--write'));
