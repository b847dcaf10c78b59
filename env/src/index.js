// sluice's configuration from the environment: parsers, the loader made from a declaration, and
// the help and doc made from the same declaration (env/README.md says why this is not env-schema).
export { ConfigError } from './config-error.js';
export {
  boolean,
  decimal,
  integer,
  matching,
  milliseconds,
  oneOf,
  text,
  url,
  frozenWords,
} from './parsers.js';
export { defineVariables, loadEnv } from './load-env.js';
export { redactUrl } from './redact-url.js';
export { describeEnv, environmentHelp } from './describe-env.js';
export { TRACING_VARIABLES, loadTracingConfig, tracingConfigFrom } from './tracing.js';
