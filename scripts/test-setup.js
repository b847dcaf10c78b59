// `npm test`'s set-up step (scripts/test.js runs it, bounded, before any test): the tools the
// chosen tiers run, built or installed once into their caches, so that no test installs one under
// its own time limit. A tool that cannot be had is said here and fails the tests that need it, by
// name.
const tiers = new Set(process.argv.slice(2));
/** @type {[string, () => unknown][]} */
const tools = [];
if (tiers.has('integration')) {
  const { ensureToxiproxy } = await import('../test/support/toxiproxy.js');
  tools.push(['Toxiproxy', () => ensureToxiproxy()]);
}
if (tiers.has('system')) {
  const [{ lintTools, checkovTools }, { findK6 }, { findComposeCli }] = await Promise.all([
    import('../test/support/python-tools.js'),
    import('../bench/lib/k6-binary.js'),
    import('./compose-cli.js'),
  ]);
  tools.push(
    ['aws-sam-cli, cfn-lint, hadolint', lintTools],
    ['Checkov', checkovTools],
    ['k6', () => findK6()],
    ['the compose CLI', () => findComposeCli()],
  );
}
for (const [name, ensure] of tools) {
  try {
    await ensure();
  } catch (err) {
    console.error(
      `[test] set-up: ${name} unavailable, the tests that need ` +
        `it will fail: ${err instanceof Error ? err.message : err}`,
    );
  }
}
