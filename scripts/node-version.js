// Imported first by scripts/start.js, so that it runs before anything that needs a newer Node.
// Its syntax is kept to what old versions of Node parse: it must be able to say so itself.
// The version is package.json's "engines" and .nvmrc's (test/unit/node-version.test.js checks).
export var NODE_NEEDED = 22;

/**
 * The warning for a Node older than sluice needs, or undefined.
 * @param {string} version  process.versions.node
 */
export function nodeVersionWarning(version) {
  var major = Number(String(version).split('.')[0]);
  if (!(major < NODE_NEEDED)) return undefined;
  return (
    'sluice: warning: Node ' +
    version +
    ' is older than Node ' +
    NODE_NEEDED +
    ', which sluice needs' +
    ' (package.json "engines", .nvmrc): install Node ' +
    NODE_NEEDED +
    ' (e.g. `nvm install ' +
    NODE_NEEDED +
    '`);' +
    ' going on, but expect failures'
  );
}

var warning = nodeVersionWarning(process.versions.node);
if (warning) process.stderr.write(warning + '\n');
