// `npm run mutate`: a mutation run over the unit-tested logic of the write policy, the feeder's
// failure ledger and authentication. Each mutant is one deliberate break (a condition flipped, a
// decision swapped, a boundary moved, a retry or a check dropped), applied to its file in place and
// always restored (also on Ctrl-C); the unit tests of that file run, and the mutant is killed when
// they fail. A mutant whose text is no longer in its file (its layout aside) is reported stale, not
// run. Prints each verdict and the score; exits 1 when a mutant survives in the write policy, or
// the tests fail before any break.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Option, createCommand } from '@sluice/db/command-line';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TIMEOUT_MS = 120_000;

/** The unit tests that must catch a break in each target. */
const TESTS = {
  'service/src/users/write-policy.js': [
    'service/test/unit/write-policy.test.js',
    'service/test/unit/write-policy-causes.test.js',
  ],
  'lambda/src/batch-response.js': ['lambda/test/unit/batch-response.test.js'],
  'lambda/src/failure-ledger.js': ['lambda/test/unit/failure-ledger.test.js'],
  'service/src/auth/jwt.js': [
    'service/test/unit/jwt.test.js',
    'service/test/unit/jwt-cache.test.js',
  ],
  'service/src/auth/token-set.js': [
    'service/test/unit/credentials.test.js',
    'service/test/unit/token-source-secret.test.js',
  ],
  'service/src/auth/token-source.js': [
    'service/test/unit/credentials.test.js',
    'service/test/unit/token-source-secret.test.js',
  ],
  'service/src/http/authenticate.js': ['service/test/unit/authenticate.test.js'],
  'service/src/http/require-erase.js': ['service/test/unit/require-erase.test.js'],
};

/** @typedef {{ file: keyof typeof TESTS, name: string, find: string, replace: string }} Mutant */

/**
 * @param {keyof typeof TESTS} file
 * @param {[name: string, find: string, replace: string][]} list
 * @returns {Mutant[]}
 */
const of = (file, list) => list.map(([name, find, replace]) => ({ file, name, find, replace }));

/** @type {Mutant[]} */
export const MUTANTS = [
  ...of('service/src/users/write-policy.js', [
    ['in doubt ignored', 'if (inDoubt) return', 'if (false) return'],
    [
      'an outcome_unknown wrapped again',
      'cause instanceof OutcomeUnknownError ? cause : new OutcomeUnknownError(cause)',
      'new OutcomeUnknownError(cause)',
    ],
    [
      'unavailable not a 503',
      "if (diagnosis === 'unavailable') return",
      "if (diagnosis === 'unavailable_') return",
    ],
    [
      'an unavailable error wrapped again',
      'cause instanceof DatabaseUnavailableError ? cause : new DatabaseUnavailableError(cause)',
      'new DatabaseUnavailableError(cause)',
    ],
    [
      'statement_timeout not a 503',
      "diagnosis === 'lock_timeout' || diagnosis === 'statement_timeout'",
      "diagnosis === 'lock_timeout'",
    ],
    [
      'lock_timeout not a 503',
      "diagnosis === 'lock_timeout' || diagnosis === 'statement_timeout'",
      "diagnosis === 'statement_timeout'",
    ],
    [
      'a group lock limit off by one',
      'Math.min(lockTimeoutMs, GROUP_LOCK_TIMEOUT_MS)',
      'Math.min(lockTimeoutMs - 1, GROUP_LOCK_TIMEOUT_MS)',
    ],
    ['a group lock limit never set', 'groupLockTimeoutMs ? Object.freeze', 'false ? Object.freeze'],
    ['the slow lane waits briefly', 'slow: undefined', 'slow: brief'],
    ['a batch waits briefly', 'batch: undefined', 'batch: brief'],
    ['a stream under the defaults', 'stream: STREAM_LIMITS', 'stream: undefined'],
    [
      'a stream under a statement timeout',
      'Object.freeze({ statementTimeoutMs: 0 })',
      'Object.freeze({ statementTimeoutMs: 1 })',
    ],
    [
      'a passing stream failure answered as it is',
      "diagnosis === 'transient' ? 'unavailable' : diagnosis",
      'diagnosis',
    ],
    [
      'a stream retried',
      "if (kind === 'stream') return fail(",
      "if (kind === 'stream') return RETRY; if (kind === 'stream') return fail(",
    ],
    [
      'the table-lock decision swapped',
      '(await isTableLocked()) ? fail(refusalOfDatabaseState(diagnosis, err)) : EACH_ALONE',
      '(await isTableLocked()) ? EACH_ALONE : fail(refusalOfDatabaseState(diagnosis, err))',
    ],
    [
      'a group lock timeout without the table check',
      "if (diagnosis === 'lock_timeout') return (await isTableLocked())",
      "if (diagnosis === 'lock_timeout') return (true)",
    ],
    [
      "a group's 503 written alone",
      'return refusal ? fail(refusal) : EACH_ALONE;',
      'return EACH_ALONE;',
    ],
    [
      'a group failure answered, not written alone',
      'return refusal ? fail(refusal) : EACH_ALONE;',
      'return fail(refusal ?? err);',
    ],
    [
      'a passing failure not retried',
      "return diagnosis === 'transient' ? RETRY : fail(",
      "return diagnosis !== 'transient' ? RETRY : fail(",
    ],
    ['retried without end', 'if (previous === undefined) return', 'if (true) return'],
    [
      'an own failure as a 503',
      'fail(refusalOfDatabaseState(diagnosis, err) ?? failure.error);\n',
      "fail(refusalOfDatabaseState(diagnosis === 'own' " +
        "? 'unavailable' : diagnosis, err) ?? failure.error);\n",
    ],
    [
      "the second attempt's 503 lost",
      'const refusal = refusalOfDatabaseState(diagnosis, err) ?? classifyFailure(err).error;',
      'const refusal = classifyFailure(err).error;',
    ],
    ['a first attempt in doubt forgotten', '!first.inDoubt ||', 'true ||'],
    [
      "the second attempt's own doubt replaced",
      '|| refusal instanceof OutcomeUnknownError ?',
      '|| false ?',
    ],
    [
      'the slow lane taken when full',
      'slotFree && err instanceof DatabaseTimeoutError',
      'err instanceof DatabaseTimeoutError',
    ],
    [
      'the slow lane for any timeout',
      "err.code === 'lock_timeout'",
      "err.code !== 'statement_timeout_'",
    ],
  ]),
  ...of('lambda/src/batch-response.js', [
    [
      'the first failure dropped',
      '[...failedMessageIds].map(',
      '[...failedMessageIds].slice(1).map(',
    ],
    ['the field misnamed', 'return { batchItemFailures:', 'return { batchItemFailure:'],
  ]),
  ...of('lambda/src/failure-ledger.js', [
    ['a failure replaces poison', "if (own.get(messageId)?.kind !== 'poison') own.set", 'own.set'],
    [
      'earlier messages held, not later',
      'first.index < at.index ? first.messageId',
      'first.index > at.index ? first.messageId',
    ],
    [
      "a group's first failure is its latest",
      'first === undefined || at.index < first.index',
      'true',
    ],
    [
      'messages without a group held',
      'at?.group === undefined ? undefined : failedGroups.get(at.group)',
      'failedGroups.get(at?.group)',
    ],
    ['never a FIFO batch', 'fifo: records.some(', 'fifo: false && records.some('],
    ['an own failure forgotten by hasFailed', 'own.has(messageId) || heldBehind', 'heldBehind'],
    ['a held message forgotten by hasFailed', '|| heldBehind(messageId) !== undefined', ''],
    [
      'held messages left out of the answer',
      'else if (behind) all.set(',
      'else if (false) all.set(',
    ],
  ]),
  ...of('service/src/auth/jwt.js', [
    [
      'a cached token past its exp',
      'until: Math.min(now + VERIFIED_CACHE_MS, expires)',
      'until: now + VERIFIED_CACHE_MS',
    ],
    [
      'the cache kept a second longer',
      'if (Date.now() < known.until)',
      'if (Date.now() < known.until + 1000)',
    ],
    ['the cache unbounded', 'if (verified.size >= VERIFIED_CACHE_SIZE) verified.clear();', ''],
    [
      'the cache emptied one token late',
      'verified.size >= VERIFIED_CACHE_SIZE',
      'verified.size > VERIFIED_CACHE_SIZE',
    ],
    ['anon grants writing', 'role !== ANONYMOUS_ROLE', 'true'],
    [
      'an empty role grants writing',
      "typeof role === 'string' && role !== ''",
      "typeof role === 'string'",
    ],
    ['JWT_ROLES ignored', 'roles ? roles.has(role) :', 'false ? roles.has(role) :'],
    ['every role may erase', 'mayErase: eraseRoles.has(role),', 'mayErase: true,'],
    [
      'the cache forgets the right to erase',
      'return known.identity;',
      'return { ...known.identity, mayErase: false };',
    ],
    ['a minute of clock skew', 'clockTolerance: CLOCK_TOLERANCE_S,', 'clockTolerance: 60,'],
    [
      'HS512 accepted for a secret',
      "? ['HS256'] : ASYMMETRIC",
      "? ['HS256', 'HS512'] : ASYMMETRIC",
    ],
    ['HMAC accepted from a key set', ': ASYMMETRIC,', ": [...ASYMMETRIC, 'HS256'],"],
    [
      'audience unchecked',
      '...(config.audience !== undefined ? { audience: config.audience } : {}),',
      '',
    ],
    ['nbf reported as exp', "if (err.claim === 'nbf')", "if (err.claim === 'exp')"],
    [
      'a failed key set fetch as malformed',
      "if (keySet) return new JwtRefusal('the key set could not " +
        "be fetched to verify the token', 'jwks_unavailable');",
      '',
    ],
    ['a long client name kept whole', 'claimed.slice(0, 256)', 'claimed'],
  ]),
  ...of('service/src/auth/token-set.js', [
    ['one token for two clients', 'if (owner !== undefined) refuse(', 'if (false) refuse('],
    ["a client's repeated token refused", 'if (owner === name) continue;', ''],
    ['a later entry grants erasing', 'if (seen.has(name)) continue;', ''],
    ['no client may erase', 'if (erase === true) this.erasers.add(name);', ''],
  ]),
  ...of('service/src/auth/token-source.js', [
    [
      'refreshes that overlap both read',
      'this.reading ??= this.read()',
      'this.reading = this.read()',
    ],
    ['a read never ends', '        this.reading = undefined;', '        ;'],
    [
      'no current version accepted',
      "if (current === undefined) throw new TypeError('names a secret with no current version');",
      '',
    ],
    [
      'pending tokens refused',
      'return pending === undefined ? [current] : [current, pending];',
      'return [current];',
    ],
    [
      'current read before pending',
      "const pending = await secrets.getSecretString(secretId, 'AWSPENDING');\n    " +
        "const current = await secrets.getSecretString(secretId, 'AWSCURRENT');",
      "const current = await secrets.getSecretString(secretId, 'AWSCURRENT');\n    " +
        "const pending = await secrets.getSecretString(secretId, 'AWSPENDING');",
    ],
    ['a bad refresh stops the service', 'if (throwOnError) throw err;', 'throw err;'],
    [
      'INGEST_TOKEN may not erase',
      'token: config.ingestToken, erase: /** @type {const} */ (true) }',
      'token: config.ingestToken }',
    ],
    ['an unchanged read logged again', 'if (signature === this.lastRead) return;', ''],
  ]),
  ...of('service/src/http/authenticate.js', [
    ['the scheme case-sensitive', '/^Bearer +([^ ].*)$/i', '/^Bearer +([^ ].*)$/'],
    [
      'Authorization twice accepted',
      "repeatedHeaders(req, ['authorization']).length > 0",
      "repeatedHeaders(req, ['authorization']).length > 1",
    ],
    ['anything verified as a JWT', 'if (!verifyJwt || !JWT_SHAPE.test(token))', 'if (!verifyJwt)'],
    [
      "a JWT's subject as its label",
      'accept(req, { name, scope: jwtScope(subject), label: JWT_LABEL, mayErase });',
      'accept(req, { name, scope: jwtScope(subject), label: name, mayErase });',
    ],
    ['every token may erase', 'const mayErase = set.mayErase(client);', 'const mayErase = true;'],
    [
      "a JWT's right to erase dropped",
      'label: JWT_LABEL, mayErase });',
      'label: JWT_LABEL, mayErase: false });',
    ],
    ['a verifier bug as a 401', 'if (!(err instanceof JwtRefusal)) return next(err);', ''],
    [
      'a missing header as malformed',
      "return refuse(req, next, 'missing', 'missing');",
      "return refuse(req, next, 'malformed', 'missing');",
    ],
    [
      'no match taken as a match',
      'if (set && client !== undefined) {',
      'if (set && client !== null) {',
    ],
  ]),
  ...of('service/src/http/require-erase.js', [
    ['anyone may erase', 'if (req.mayErase === true) return next();', 'return next();'],
    ['a truthy right taken', 'if (req.mayErase === true)', 'if (req.mayErase)'],
    [
      'closed without credentials',
      'if (!tokens && !verifyJwt) return (_req, _res, next) => next();',
      '',
    ],
    ['no credential closes it', 'if (!tokens && !verifyJwt)', 'if (!tokens || !verifyJwt)'],
  ]),
];

/**
 * Runs the unit tests of a target; resolves with whether they passed.
 * @param {string[]} files
 */
function testsPass(files) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--test', '--test-reporter=dot', ...files], {
      cwd: ROOT,
      stdio: 'ignore',
      env: { ...process.env, NODE_ENV: 'test' },
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve(code === 0);
    });
  });
}

/**
 * The file being mutated and its text, restored whatever happens.
 * @type {{ file: string, text: string } | undefined}
 */
let applied;
const restore = () => {
  if (applied) writeFileSync(applied.file, applied.text);
  applied = undefined;
};
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    restore();
    process.exit(130);
  });
}

/**
 * The mutant's text wherever the formatter broke its lines or added a trailing comma: its
 * characters in order, with any layout between them.
 * @param {string} find
 */
function layoutFree(find) {
  const chars = [...find.replace(/\s+/g, '')].map((c) => c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(chars.join('\\s*').replace(/\\s\*(\\[)\]])/g, ',?\\s*$1'), 'g');
}

/** @param {Mutant} mutant @returns {Promise<'killed' | 'survived' | 'stale'>} */
async function run(mutant) {
  const file = path.join(ROOT, mutant.file);
  const text = readFileSync(file, 'utf8');
  const exact = text.split(mutant.find).length === 2;
  const matches = exact ? [] : [...text.matchAll(layoutFree(mutant.find))];
  if (!exact && matches.length !== 1) return 'stale';
  const at = exact ? text.indexOf(mutant.find) : matches[0].index;
  const found = exact ? mutant.find : matches[0][0];
  applied = { file, text };
  try {
    writeFileSync(file, text.slice(0, at) + mutant.replace + text.slice(at + found.length));
    return (await testsPass(TESTS[mutant.file])) ? 'survived' : 'killed';
  } finally {
    restore();
  }
}

async function main() {
  const { only } = createCommand(
    'npm run mutate --',
    `A mutation run: ${MUTANTS.length} deliberate breaks of the write policy, the ` +
      `feeder's failure ledger (batch response, failure ledger) and authentication, ` +
      `each applied in place and restored, each judged by its file's unit tests: killed ` +
      `(they fail), survived, or stale (the text to break is no longer there). Prints ` +
      `each verdict and the score; exits 1 when a mutant survives in the write policy.`,
  )
    .addOption(new Option('--only <text>', 'only the mutants whose file or name contains this'))
    .parse()
    .opts();
  const mutants = only
    ? MUTANTS.filter((m) => m.file.includes(only) || m.name.includes(only))
    : MUTANTS;
  for (const files of new Set(mutants.map((m) => TESTS[m.file]))) {
    if (!(await testsPass(files))) {
      console.error(`the tests fail before any break: ${files.join(' ')}`);
      process.exit(1);
    }
  }
  /** @type {Record<string, Record<'killed' | 'survived' | 'stale', number>>} */
  const byFile = {};
  /** @type {Mutant[]} */
  const survivors = [];
  for (const mutant of mutants) {
    const verdict = await run(mutant);
    (byFile[mutant.file] ??= { killed: 0, survived: 0, stale: 0 })[verdict]++;
    if (verdict === 'survived') survivors.push(mutant);
    console.log(`${verdict.padEnd(8)} ${mutant.file}: ${mutant.name}`);
  }
  console.log('');
  let killed = 0;
  let survived = 0;
  for (const [file, n] of Object.entries(byFile)) {
    killed += n.killed;
    survived += n.survived;
    console.log(
      `${file}: ${n.killed}/${n.killed + n.survived} killed${n.stale ? `, ${n.stale} stale` : ''}`,
    );
  }
  console.log(
    `score: ${killed}/${killed + survived} killed ` +
      `(${Math.round((100 * killed) / Math.max(1, killed + survived))}%)`,
  );
  if (survivors.length > 0)
    console.log(`survivors:\n${survivors.map((m) => `  ${m.file}: ${m.name}`).join('\n')}`);
  if (survivors.some((m) => m.file.endsWith('write-policy.js'))) process.exitCode = 1;
}

await main();
