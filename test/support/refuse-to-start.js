// Preloaded (node --import) into a command that is asked only for its usage: the first attempt to
// start anything (a process such as PostgreSQL or k6, a listening server, an outgoing connection)
// ends the process, exit code 70, with a line naming what it tried: a test can tell "answered at
// once" from "started work first". Never import it into a process that must go on working.
import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import net from 'node:net';

/** @param {string} what @returns {never} */
function refuse(what) {
  process.stderr.write(`refuse-to-start: the command tried to ${what}\n`);
  process.exit(70);
}

for (const name of /** @type {const} */ ([
  'spawn',
  'spawnSync',
  'exec',
  'execSync',
  'execFile',
  'execFileSync',
  'fork',
])) {
  /** @type {any} */ (childProcess)[name] = (/** @type {unknown} */ file) =>
    refuse(`${name} ${file}`);
}
net.Server.prototype.listen = function listen() {
  return refuse('listen on a port');
};
net.Socket.prototype.connect = function connect() {
  return refuse('open a connection');
};
// `import { spawn } from 'node:child_process'` binds the patched functions too.
syncBuiltinESMExports();
