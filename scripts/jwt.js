// `npm run jwt`: a JWT for a script or a test, HS256 with the service's JWT_SECRET read from this
// shell's environment, and JWT_AUDIENCE, JWT_ISSUER, JWT_ROLE_CLAIM and JWT_CLIENT_CLAIM as the
// service reads them, so that the service accepts it. A secret it cannot sign with is one line
// naming the variable (jose's own error is a stack about a zero-length key).
import { createCommand } from '@sluice/db/command-line';
import { environmentHelp } from '@sluice/env';
import { JWT_SECRET_MIN_LENGTH, SERVICE_VARIABLES } from '../service/src/config.js';

const { JWT_SECRET, JWT_AUDIENCE, JWT_ISSUER, JWT_ROLE_CLAIM, JWT_CLIENT_CLAIM } =
  SERVICE_VARIABLES;
const program = createCommand(
  'npm run jwt --',
  'Prints a JWT signed with HS256 and JWT_SECRET, which must be in this shell: the same ' +
    'text npm start was given. Its claims: the role and the client (by JWT_ROLE_CLAIM and ' +
    'JWT_CLIENT_CLAIM), aud and iss when JWT_AUDIENCE and JWT_ISSUER are set, and an expiry. ' +
    'In T=$(npm run -s jwt), -s keeps npm from printing its own lines around the token.',
  environmentHelp({ JWT_SECRET, JWT_AUDIENCE, JWT_ISSUER, JWT_ROLE_CLAIM, JWT_CLIENT_CLAIM }),
)
  .option('--sub <client>', 'the client, in JWT_CLIENT_CLAIM', 'script')
  .option('--role <role>', 'the role, in JWT_ROLE_CLAIM (anon never writes)', 'writer')
  .option('--expires <period>', 'how long it is valid (jose: 30m, 1h, 7d)', '1h')
  .parse();
const args = program.opts();

/** @param {string} message @returns {never} */
function fail(message) {
  console.error(`jwt: ${message}`);
  process.exit(1);
}

const secret = process.env.JWT_SECRET ?? '';
if (!secret.trim())
  fail(
    'JWT_SECRET is not set in this shell: export the secret npm ' +
      'start was given (export JWT_SECRET=...), then run this again',
  );
if (secret.length < JWT_SECRET_MIN_LENGTH)
  fail(
    `JWT_SECRET is ${secret.length} characters: the service takes at ` +
      `least ${JWT_SECRET_MIN_LENGTH}, so it would refuse to start with it`,
  );
const env = (/** @type {string} */ name) => process.env[name]?.trim() || undefined;
const { SignJWT } = await import('jose');
const jwt = new SignJWT({
  [env('JWT_ROLE_CLAIM') ?? JWT_ROLE_CLAIM.default]: args.role,
  [env('JWT_CLIENT_CLAIM') ?? JWT_CLIENT_CLAIM.default]: args.sub,
})
  .setProtectedHeader({ alg: 'HS256' })
  .setIssuedAt();
const [audience, issuer] = [env('JWT_AUDIENCE'), env('JWT_ISSUER')];
if (audience) jwt.setAudience(audience);
if (issuer) jwt.setIssuer(issuer);
try {
  jwt.setExpirationTime(args.expires);
} catch {
  fail(`--expires ${args.expires}: not a period jose reads (e.g. 30m, 1h, 7d)`);
}
console.log(await jwt.sign(new TextEncoder().encode(secret)));
