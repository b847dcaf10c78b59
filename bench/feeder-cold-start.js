#!/usr/bin/env node
// `npm run bench:feeder-cold-start`: what the feeder's code costs a Lambda cold start (the usage
// says how; --help).
import { Option, createCommand, wholeNumber } from '@sluice/db/command-line';

const command = createCommand(
  'npm run bench:feeder-cold-start --',
  "What the feeder's code costs a Lambda cold start. Each sample is a fresh Node process that imports a handler module (the runtime's own start is the same whatever the module) and then makes the first invocation, which reads the token from Secrets Manager (a stub on 127.0.0.1 speaking its protocol, through the real SDK) and posts one user (a stub service). The targets run interleaved, one sample of each per round, so the machine's noise falls on all of them alike: source (lambda/src/handler.js, as the tests load it), artifact (.aws-sam/build/FeederFunction/handler.mjs, what `sam build` made, run with the built template's NODE_OPTIONS), with --variants two builds with the template's esbuild options and one change each (the AWS SDK left to the runtime's copy; no source maps), and any MODULE given (another checkout's artifact, for a before/after pair). Prints the median and range of the import alone and of import + first invocation, in wall and CPU time.",
)
  .argument('[module...]', 'more handler modules to time beside the others')
  .addOption(new Option('--runs <n>', 'rounds').env('RUNS').argParser(wholeNumber(1)).default(15))
  .option('--variants', 'also time the two variant builds')
  .option('--no-build', 'time the artifact as it is, without running sam build first')
  .parse();
const opts = command.opts();
const modules = command.args;
const RUNS = /** @type {number} */ (opts.runs);

const { execFile: execFileCallback } = await import('node:child_process');
const { existsSync, readdirSync, statSync } = await import('node:fs');
const { mkdtemp, readFile, rm, symlink } = await import('node:fs/promises');
const { default: os } = await import('node:os');
const { default: path } = await import('node:path');
const { fileURLToPath, pathToFileURL } = await import('node:url');
const { promisify } = await import('node:util');
const { markdownTable } = await import('markdown-table');
const { parse } = await import('yaml');
const { startSecretsManagerStub } = await import('../lambda/test/support/secrets-manager-stub.js');
const { lintTools } = await import('../test/support/python-tools.js');
const { makeRecord } = await import('../lambda/test/support/sqs-events.js');
const { startStubService } = await import('../lambda/test/support/stub-service.js');
const { median, range } = await import('./lib/stats.js');

const execFile = promisify(execFileCallback);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ARTIFACT_DIR = path.join(root, '.aws-sam', 'build', 'FeederFunction');
/** @param {string} m */
const say = (m) => console.error(`[bench:feeder-cold-start] ${m}`);

if (opts.build) {
  say('sam build');
  await execFile(lintTools()('sam'), ['build'], {
    cwd: root,
    env: { ...process.env, SAM_CLI_TELEMETRY: '0' },
  });
}

/** @typedef {{ name: string, file: string, execArgv: string[] }} Target */

/** The feeder function's resource in a template. @param {string} file */
async function feederFunction(file) {
  return parse(await readFile(file, 'utf8')).Resources.FeederFunction;
}

/**
 * esbuild's command line from a function's BuildProperties, the way SAM's esbuild workflow writes
 * it (aws-lambda-builders' EsbuildCommandBuilder): camel case to kebab case, a list repeats the
 * flag with a colon, `true` is a bare flag.
 * @param {Record<string, unknown>} props @param {string} codeDir @param {string} outdir
 */
function esbuildArgs(props, codeDir, outdir) {
  const kebab = (/** @type {string} */ key) =>
    key.replace(/[a-z][A-Z]/g, (m) => `${m[0]}-${m[1]}`).toLowerCase();
  const args = ['--bundle', '--platform=node', `--outdir=${outdir}`];
  for (const [key, value] of Object.entries(props)) {
    if (key === 'EntryPoints') continue;
    if (Array.isArray(value)) args.push(...value.map((v) => `--${kebab(key)}:${v}`));
    else if (value === true) args.push(`--${kebab(key)}`);
    else if (value !== false) args.push(`--${kebab(key)}=${value}`);
  }
  return [
    ...args,
    .../** @type {string[]} */ (props.EntryPoints).map((e) => path.join(codeDir, e)),
  ];
}

/** Files and bytes under a directory. @param {string} dir */
function sizeOf(dir) {
  let files = 0;
  let bytes = 0;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    files++;
    bytes += statSync(path.join(entry.parentPath ?? entry.path, entry.name)).size;
  }
  return { files, bytes };
}

/** @type {Target[]} */
const targets = [
  {
    name: 'source: lambda/src/handler.js',
    file: path.join(root, 'lambda', 'src', 'handler.js'),
    execArgv: [],
  },
];
/** @type {string | undefined} */ let scratch;
if (existsSync(path.join(ARTIFACT_DIR, 'handler.mjs'))) {
  const built = await feederFunction(path.join(root, '.aws-sam', 'build', 'template.yaml'));
  const nodeOptions = String(built.Properties.Environment?.Variables?.NODE_OPTIONS ?? '').trim();
  const execArgv = nodeOptions ? nodeOptions.split(/\s+/) : [];
  const { files, bytes } = sizeOf(ARTIFACT_DIR);
  say(
    `artifact: ${files} files, ${bytes} bytes (${readdirSync(ARTIFACT_DIR).join(', ')}); NODE_OPTIONS ${nodeOptions || '(none)'}`,
  );
  targets.push({
    name: `artifact: sam build${execArgv.length ? ` (${execArgv.join(' ')})` : ''}`,
    file: path.join(ARTIFACT_DIR, 'handler.mjs'),
    execArgv,
  });
  if (opts.variants) {
    targets.push({
      name: 'artifact without source maps',
      file: path.join(ARTIFACT_DIR, 'handler.mjs'),
      execArgv: [],
    });
    // Built beside a link to the repository's node_modules, where the SDK resolves as the runtime's would.
    scratch = await mkdtemp(path.join(os.tmpdir(), 'sluice-cold-start-'));
    await symlink(path.join(root, 'node_modules'), path.join(scratch, 'node_modules'), 'dir');
    const fn = await feederFunction(path.join(root, 'template.yaml'));
    const props = {
      ...fn.Metadata.BuildProperties,
      External: [...(fn.Metadata.BuildProperties.External ?? []), '@aws-sdk/*'],
    };
    await execFile(
      path.join(root, 'node_modules', '.bin', 'esbuild'),
      esbuildArgs(
        props,
        path.join(root, fn.Properties.CodeUri),
        path.join(scratch, 'sdk-external'),
      ),
    );
    const { bytes: externalBytes } = sizeOf(path.join(scratch, 'sdk-external'));
    say(`the bundle without the AWS SDK: ${externalBytes} bytes`);
    targets.push({
      name: "artifact with the AWS SDK external (the runtime's)",
      file: path.join(scratch, 'sdk-external', 'handler.mjs'),
      execArgv,
    });
  }
} else {
  say(
    `no ${path.relative(root, ARTIFACT_DIR)}/handler.mjs (--no-build without a build): measuring the source alone`,
  );
}
for (const file of modules) targets.push({ name: file, file: path.resolve(file), execArgv: [] });

const secrets = await startSecretsManagerStub({ token: 'bench-token' });
const service = await startStubService((users) => [
  201,
  { received: users.length, inserted: users.length, updated: 0, duplicates: 0 },
]);
const record = makeRecord({ email: 'cold@example.com', name: 'Cold Start' });
/** @param {string} file */
const probe = (file) => `
const cpuMs = (u) => (u.user + u.system) / 1000;
const t0 = performance.now(), c0 = process.cpuUsage();
const { handler } = await import(${JSON.stringify(pathToFileURL(file).href)});
const t1 = performance.now(), c1 = process.cpuUsage();
const out = await handler({ Records: [${JSON.stringify(record)}] }, { awsRequestId: 'cold-start', getRemainingTimeInMillis: () => 60000 });
const t2 = performance.now(), c2 = process.cpuUsage();
if (out.batchItemFailures.length) throw new Error('the first invocation failed: ' + JSON.stringify(out));
console.log('COLD-START ' + JSON.stringify({ importMs: t1 - t0, importCpuMs: cpuMs(c1) - cpuMs(c0), firstMs: t2 - t0, firstCpuMs: cpuMs(c2) - cpuMs(c0) }));`;

// Wall time is what a cold start waits; CPU time (every thread of the process) is what it costs,
// and moves less when other work shares the machine.
const METRICS = /** @type {const} */ (['importMs', 'importCpuMs', 'firstMs', 'firstCpuMs']);
/** @typedef {Record<typeof METRICS[number], number[]>} Samples */
/** @type {Map<string, Samples>} */
const samples = new Map(
  targets.map((t) => [
    t.name,
    /** @type {Samples} */ (
      /** @type {unknown} */ (Object.fromEntries(METRICS.map((m) => [m, []])))
    ),
  ]),
);
try {
  for (let round = 0; round < RUNS; round++) {
    for (const target of targets) {
      const { stdout } = await execFile(
        process.execPath,
        [...target.execArgv, '--input-type=module', '-e', probe(target.file)],
        {
          env: { ...process.env, ...secrets.env, SERVICE_URL: service.url, NODE_OPTIONS: '' },
          timeout: 60_000,
        },
      );
      const line = stdout.split('\n').find((l) => l.startsWith('COLD-START '));
      if (!line) throw new Error(`${target.name}: the probe printed no timing:\n${stdout}`);
      const measured = JSON.parse(line.slice('COLD-START '.length));
      const s = /** @type {Samples} */ (samples.get(target.name));
      for (const m of METRICS) s[m].push(measured[m]);
    }
  }
} finally {
  await Promise.all([secrets.close(), service.close()]);
  if (scratch) await rm(scratch, { recursive: true, force: true });
}

/** @param {number[]} values */
function summary(values) {
  const { min, max } = range(values);
  return `${median(values).toFixed(1)} (${min.toFixed(1)} to ${max.toFixed(1)})`;
}
console.log(
  markdownTable([
    [
      'module',
      'import ms, median (min to max)',
      'import CPU ms',
      'import + first invocation ms',
      'its CPU ms',
    ],
    ...targets.map((t) => [
      t.name,
      ...METRICS.map((m) => summary(/** @type {Samples} */ (samples.get(t.name))[m])),
    ]),
  ]),
);
console.log(
  `\n${RUNS} rounds of fresh processes, interleaved; Node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'CPU'}`,
);
