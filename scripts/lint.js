#!/usr/bin/env node
// `npm run lint`: the type check, tsc over jsconfig.json, with a command line like every other command's.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCommand } from '@sluice/db/command-line';

createCommand('npm run lint --', "Type-checks the JavaScript against its JSDoc types: writes the service's API types from its OpenAPI document (.cache/openapi/sluice-api.d.ts, which the feeder's JSDoc imports), then tsc -p jsconfig.json (checkJs, strict, no output); exits with tsc's code.").parse();
const { writeOpenApiTypes } = await import('./openapi-types.js');
await writeOpenApiTypes();

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// typescript's own entry point, found as Node finds it: this works outside `npm run`, whose PATH holds node_modules/.bin.
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const child = spawn(process.execPath, [tsc, '-p', path.join(root, 'jsconfig.json')], { cwd: root, stdio: 'inherit' });
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
