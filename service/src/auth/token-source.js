import { readFile } from 'node:fs/promises';
import { ConfigError } from '@sluice/env';
import { parseNamedTokens } from '@sluice/env/named-tokens';
import { DEFAULT_CLIENT, TokenSet, mergeNamedTokens } from './token-set.js';

/** @typedef {import('./token-set.js').NamedToken} NamedToken */

/**
 * @typedef {object} TokenSourceConfig
 * @property {string | undefined} ingestToken            INGEST_TOKEN: the client `default`
 * @property {NamedToken[] | undefined} ingestTokens     INGEST_TOKENS, parsed
 * @property {string | undefined} ingestTokensFile       INGEST_TOKENS_FILE
 * @property {string | undefined} ingestTokensSecretArn  INGEST_TOKENS_SECRET_ARN
 * @property {number} ingestTokensRefreshMs              how often a file or a secret is read again
 */

/**
 * What GetSecretValue answers (the part read here); a client is injected by tests.
 * @typedef {{ getSecretString: (secretId: string, versionStage: string) => Promise<string | undefined> }} SecretReader
 */

/**
 * The static tokens in force, kept current. INGEST_TOKEN and INGEST_TOKENS are read once; a file
 * (INGEST_TOKENS_FILE) or a Secrets Manager secret (INGEST_TOKENS_SECRET_ARN) is read at start and
 * again every INGEST_TOKENS_REFRESH_MS, so a client is added, rotated or revoked without a restart.
 *
 * The file is read whole each time (a few hundred bytes) and compared with what was read before,
 * rather than watched: fs.watch misses the atomic rename editors and Kubernetes' secret volumes
 * replace a file by, and a poll is one code path for the file and the secret.
 *
 * The secret is read at two stages, AWSPENDING first, then AWSCURRENT, and the clients of both
 * are accepted: during a rotation (template.yaml's rotation function) the new tokens are pending
 * before they become current, and the service has accepted them for a refresh or more by then.
 * Read in that order, a rotation that finishes between the two reads leaves the new tokens in the
 * set (the current version is then the new one), never only the old ones.
 *
 * A source that cannot be read at start stops the service (a ConfigError naming the variable);
 * one that cannot be read later, or reads badly, is logged and the tokens in force stay.
 */
export class TokenSource {
  /**
   * @param {TokenSourceConfig} config
   * @param {{ logger: import('pino').Logger, secrets?: SecretReader }} deps
   */
  constructor(config, { logger, secrets }) {
    this.config = config;
    this.logger = logger;
    this.secrets = secrets;
    /** The fixed part: INGEST_TOKEN and INGEST_TOKENS. @type {NamedToken[]} */
    this.fixed = [
      ...(config.ingestToken !== undefined ? [{ name: DEFAULT_CLIENT, token: config.ingestToken }] : []),
      ...(config.ingestTokens ?? []),
    ];
    /** @type {TokenSet} */
    this.current = new TokenSet(this.fixed);
    /** What the file or the secret held last, to log only a change. */
    this.lastRead = '';
    /** @type {NodeJS.Timeout | undefined} */
    this.timer = undefined;
    /** @type {Promise<void> | undefined} */
    this.reading = undefined;
  }

  /** The variable a refresh reads, for messages: its name, never its value. */
  get variable() {
    return this.config.ingestTokensFile !== undefined ? 'INGEST_TOKENS_FILE' : 'INGEST_TOKENS_SECRET_ARN';
  }

  get refreshes() {
    return this.config.ingestTokensFile !== undefined || this.config.ingestTokensSecretArn !== undefined;
  }

  /**
   * Reads the file or the secret the first time (nothing to read for the fixed tokens) and starts
   * refreshing. Rejects with a ConfigError naming the variable.
   */
  async start() {
    if (!this.refreshes) return this;
    try {
      await this.refresh({ throwOnError: true });
    } catch (err) {
      throw new ConfigError(this.variable, problemOf(err));
    }
    this.timer = setInterval(() => void this.refresh(), this.config.ingestTokensRefreshMs).unref();
    return this;
  }

  close() {
    clearInterval(this.timer);
  }

  /**
   * Reads the file or the secret again; a read already under way is shared.
   * @param {{ throwOnError?: boolean }} [options]
   */
  refresh({ throwOnError = false } = {}) {
    this.reading ??= this.read()
      .catch((err) => {
        if (throwOnError) throw err;
        // The variable and the problem, never what was read: it may hold a token.
        this.logger.warn({ variable: this.variable, problem: problemOf(err) }, 'the tokens could not be read again; those in force stay');
      })
      .finally(() => {
        this.reading = undefined;
      });
    return this.reading;
  }

  async read() {
    const texts = this.config.ingestTokensFile !== undefined
      ? [await readFile(this.config.ingestTokensFile, 'utf8')]
      : await this.readSecret(/** @type {string} */ (this.config.ingestTokensSecretArn));
    const signature = texts.join('\u0000');
    if (signature === this.lastRead) return;
    const tokens = mergeNamedTokens([this.fixed, ...texts.map(parseNamedTokens)]);
    this.current = new TokenSet(tokens);
    this.lastRead = signature;
    this.logger.info({ variable: this.variable, clients: [...this.current.names] }, 'bearer tokens read');
  }

  /** @param {string} secretId */
  async readSecret(secretId) {
    const secrets = /** @type {SecretReader} */ (this.secrets);
    // Pending first: see the class's comment.
    const pending = await secrets.getSecretString(secretId, 'AWSPENDING');
    const current = await secrets.getSecretString(secretId, 'AWSCURRENT');
    if (current === undefined) throw new TypeError('names a secret with no current version');
    return pending === undefined ? [current] : [current, pending];
  }
}

/**
 * A problem as a sentence that follows the variable's name, from a parse error (its own message,
 * which quotes names only) or an I/O or AWS error (its code or name: never a message, which
 * might quote what was read).
 * @param {unknown} err
 */
function problemOf(err) {
  if (err instanceof TypeError) return err.message;
  const e = /** @type {{ code?: unknown, name?: unknown }} */ (err ?? {});
  return `cannot be read (${typeof e.code === 'string' ? e.code : typeof e.name === 'string' ? e.name : 'error'})`;
}

/**
 * Secrets Manager's GetSecretValue by version stage, through the AWS SDK, imported only when a
 * secret is configured (a local service loads nothing of the SDK). A stage the secret does not
 * have (no rotation under way: no AWSPENDING) is undefined.
 * @returns {Promise<SecretReader>}
 */
export async function awsSecretReader() {
  const { GetSecretValueCommand, ResourceNotFoundException, SecretsManagerClient } = await import('@aws-sdk/client-secrets-manager');
  const client = new SecretsManagerClient({});
  return {
    async getSecretString(secretId, versionStage) {
      try {
        const { SecretString } = await client.send(new GetSecretValueCommand({ SecretId: secretId, VersionStage: versionStage }));
        return SecretString;
      } catch (err) {
        if (err instanceof ResourceNotFoundException && versionStage !== 'AWSCURRENT') return undefined;
        throw err;
      }
    },
  };
}

/**
 * The token source of a configuration, read and refreshing; undefined when no static token is
 * configured (JWTs alone, or no authentication).
 * @param {TokenSourceConfig} config
 * @param {{ logger: import('pino').Logger, secrets?: SecretReader }} deps
 */
export async function startTokenSource(config, { logger, secrets }) {
  if (config.ingestToken === undefined && config.ingestTokens === undefined && config.ingestTokensFile === undefined && config.ingestTokensSecretArn === undefined) return undefined;
  const reader = config.ingestTokensSecretArn !== undefined ? (secrets ?? (await awsSecretReader())) : undefined;
  return new TokenSource(config, { logger, secrets: reader }).start();
}
