/**
 * Sets variables on process.env, for code that reads it itself rather than taking an env object
 * (the feeder's handler reads its configuration there on its first invocation). Returns the
 * function that puts every one of them back as it was, unset included; call it in an after hook
 * or a finally, so no test sees another's settings.
 * @param {Record<string, string>} vars
 * @returns {() => void}
 */
export function setEnv(vars) {
  const previous = Object.keys(vars).map(
    (name) => /** @type {const} */ ([name, process.env[name]]),
  );
  Object.assign(process.env, vars);
  return () => {
    for (const [name, value] of previous) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
}
