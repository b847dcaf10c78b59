import { readFile } from 'node:fs/promises';
import { ConfigError } from '@sluice/env';
import { parseNamedTokens } from '@sluice/env/named-tokens';
import { DEFAULT_CLIENT, TokenSet, mergeNamedTokens } from './token-set.js';

/** @typedef {import('./token-set.js').NamedToken} NamedToken */

/**
 * @typedef {{ ingestToken: string | undefined, ingestTokens: NamedToken[] | undefined,
 *   ingestTokensFile: string | undefined, ingestTokensSecretArn: string | undefined,
 *   ingestTokensRefreshMs: number }} TokenSourceConfig
 */
/**
 * @typedef {{ getSecretString: (secretId: string,
 *   versionStage: string) => Promise<string | undefined> }} SecretReader
 */

// The static tokens in force: a file or a secret is read again every INGEST_TOKENS_REFRESH_MS
// (polled: fs.watch misses an atomic rename). A secret's AWSPENDING and AWSCURRENT are both
// accepted, so a rotation ending between the two reads still leaves the new tokens in. Unreadable
// at start: a ConfigError; later: logged, the tokens stay.
export class TokenSource {
  /**
   * @param {TokenSourceConfig} config
   * @param {{ logger: import('pino').Logger, secrets?: SecretReader }} deps
   */
  constructor(config, { logger, secrets }) {
    this.config = config;
    this.logger = logger;
    this.secrets = secrets;
    // INGEST_TOKEN is the one credential of a deployment that has one: its operator's, which may
    // erase as it may write (the feeder that carries erasures holds it too).
    /** The fixed part: INGEST_TOKEN and INGEST_TOKENS. @type {NamedToken[]} */
    this.fixed = [
      ...(config.ingestToken !== undefined
        ? [{ name: DEFAULT_CLIENT, token: config.ingestToken, erase: /** @type {const} */ (true) }]
        : []),
      ...(config.ingestTokens ?? []),
    ];
    /** @type {TokenSet} */
    this.current = new TokenSet(this.fixed);
    this.lastRead = '';
    /** @type {NodeJS.Timeout | undefined} */
    this.timer = undefined;
    /** @type {Promise<void> | undefined} */
    this.reading = undefined;
  }

  /** The variable a refresh reads: its name, never its value. */
  get variable() {
    return this.config.ingestTokensFile !== undefined
      ? 'INGEST_TOKENS_FILE'
      : 'INGEST_TOKENS_SECRET_ARN';
  }

  get refreshes() {
    return (
      this.config.ingestTokensFile !== undefined || this.config.ingestTokensSecretArn !== undefined
    );
  }

  /** Rejects with a ConfigError naming the variable. */
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

  /** Reads again; a read under way is shared. @param {{ throwOnError?: boolean }} [options] */
  refresh({ throwOnError = false } = {}) {
    this.reading ??= this.read()
      .catch((err) => {
        if (throwOnError) throw err;
        this.logger.warn(
          { variable: this.variable, problem: problemOf(err) },
          'the tokens could not be read again; those in force stay',
        );
      })
      .finally(() => {
        this.reading = undefined;
      });
    return this.reading;
  }

  async read() {
    const texts =
      this.config.ingestTokensFile !== undefined
        ? [await readFile(this.config.ingestTokensFile, 'utf8')]
        : await this.readSecret(/** @type {string} */ (this.config.ingestTokensSecretArn));
    const signature = texts.join('\u0000');
    if (signature === this.lastRead) return;
    const tokens = mergeNamedTokens([this.fixed, ...texts.map(parseNamedTokens)]);
    this.current = new TokenSet(tokens);
    this.lastRead = signature;
    this.logger.info(
      { variable: this.variable, clients: [...this.current.names] },
      'bearer tokens read',
    );
  }

  /** @param {string} secretId */
  async readSecret(secretId) {
    const secrets = /** @type {SecretReader} */ (this.secrets);
    const pending = await secrets.getSecretString(secretId, 'AWSPENDING');
    const current = await secrets.getSecretString(secretId, 'AWSCURRENT');
    if (current === undefined) throw new TypeError('names a secret with no current version');
    return pending === undefined ? [current] : [current, pending];
  }
}

/**
 * After the variable's name: a parse error's message (names only) or a code, never what was read.
 * @param {unknown} err
 */
function problemOf(err) {
  if (err instanceof TypeError) return err.message;
  /** @type {{ code?: unknown, name?: unknown }} */
  const e = err ?? {};
  return (
    `cannot be read (` +
    `${typeof e.code === 'string' ? e.code : typeof e.name === 'string' ? e.name : 'error'})`
  );
}

/**
 * GetSecretValue by stage (a stage the secret lacks: undefined); the AWS SDK is imported only then.
 * @returns {Promise<SecretReader>}
 */
export async function awsSecretReader() {
  const { GetSecretValueCommand, ResourceNotFoundException, SecretsManagerClient } =
    await import('@aws-sdk/client-secrets-manager');
  const client = new SecretsManagerClient({});
  return {
    async getSecretString(secretId, versionStage) {
      try {
        const { SecretString } = await client.send(
          new GetSecretValueCommand({ SecretId: secretId, VersionStage: versionStage }),
        );
        return SecretString;
      } catch (err) {
        if (err instanceof ResourceNotFoundException && versionStage !== 'AWSCURRENT')
          return undefined;
        throw err;
      }
    },
  };
}

/**
 * The token source, read and refreshing; undefined with no static token.
 * @param {TokenSourceConfig} config
 * @param {{ logger: import('pino').Logger, secrets?: SecretReader }} deps
 */
export async function startTokenSource(config, { logger, secrets }) {
  if (
    config.ingestToken === undefined &&
    config.ingestTokens === undefined &&
    config.ingestTokensFile === undefined &&
    config.ingestTokensSecretArn === undefined
  )
    return undefined;
  const reader =
    config.ingestTokensSecretArn !== undefined ? (secrets ?? (await awsSecretReader())) : undefined;
  return new TokenSource(config, { logger, secrets: reader }).start();
}
