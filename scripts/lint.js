#!/usr/bin/env node
// `npm run lint`: Prettier's check (the layout `npm run format` writes), ESLint over the whole tree
// (eslint.config.js), then the type check, tsc over jsconfig.json; a warning fails as an error
// does.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCommand } from '@sluice/db/command-line';

createCommand(
  'npm run lint --',
  "Lints and type-checks the JavaScript: Prettier's check of every JavaScript, " +
    'JSON and YAML file (npm run format writes its layout), ESLint over the whole ' +
    "tree (eslint.config.js; a warning fails too), then writes the service's API " +
    'types from its OpenAPI document (.cache/openapi/sluice-api.d.ts, which the ' +
    "feeder's JSDoc imports) and runs tsc -p jsconfig.json (checkJs, strict, no " +
    'output). Exits 1 when any of them finds something.',
).parse();
const { writeOpenApiTypes } = await import('./openapi-types.js');
const { prettier } = await import('./prettier.js');

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

/** @param {string} script @param {string[]} args @returns {Promise<number>} */
function run(script, args) {
  const child = spawn(process.execPath, [script, ...args], { cwd: root, stdio: 'inherit' });
  return new Promise((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))),
  );
}

const prettierCode = await prettier('--check');
console.error(`[lint] Prettier: ${prettierCode === 0 ? 'formatted' : 'run npm run format'}`);
const { ESLint } = await import('eslint');
const eslint = new ESLint({ cwd: root });
const results = await eslint.lintFiles(['.']);
const problems = results.reduce((sum, r) => sum + r.errorCount + r.warningCount, 0);
const report = await (await eslint.loadFormatter('stylish')).format(results);
if (report) process.stdout.write(report);
console.error(`[lint] ESLint: ${results.length} files, ${problems} problems`);

await writeOpenApiTypes();
// typescript's own entry point, found as Node finds it: this works outside `npm run`, whose PATH
// holds node_modules/.bin.
const tscCode = await run(require.resolve('typescript/bin/tsc'), [
  '-p',
  path.join(root, 'jsconfig.json'),
]);
console.error(`[lint] tsc: ${tscCode === 0 ? 'no errors' : `exit code ${tscCode}`}`);
process.exit(prettierCode !== 0 || problems > 0 || tscCode !== 0 ? 1 : 0);
