#!/usr/bin/env node
// `npm run lint`: ESLint over the whole tree (eslint.config.js), then the type check, tsc over
// jsconfig.json; a warning fails as an error does. A command line like every other command's.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCommand } from '@sluice/db/command-line';

createCommand('npm run lint --', "Lints and type-checks the JavaScript: ESLint over the whole tree (eslint.config.js; a warning fails too), then writes the service's API types from its OpenAPI document (.cache/openapi/sluice-api.d.ts, which the feeder's JSDoc imports) and runs tsc -p jsconfig.json (checkJs, strict, no output). Exits 1 when either finds something.").parse();
const { writeOpenApiTypes } = await import('./openapi-types.js');

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { ESLint } = await import('eslint');
const eslint = new ESLint({ cwd: root });
const results = await eslint.lintFiles(['.']);
const problems = results.reduce((sum, r) => sum + r.errorCount + r.warningCount, 0);
const report = await (await eslint.loadFormatter('stylish')).format(results);
if (report) process.stdout.write(report);
console.error(`[lint] ESLint: ${results.length} files, ${problems} problems`);

await writeOpenApiTypes();
// typescript's own entry point, found as Node finds it: this works outside `npm run`, whose PATH holds node_modules/.bin.
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const child = spawn(process.execPath, [tsc, '-p', path.join(root, 'jsconfig.json')], { cwd: root, stdio: 'inherit' });
const tscCode = await new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
console.error(`[lint] tsc: ${tscCode === 0 ? 'no errors' : `exit code ${tscCode}`}`);
process.exit(problems > 0 || tscCode !== 0 ? 1 : 0);
