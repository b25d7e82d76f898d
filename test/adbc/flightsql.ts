/**
 * A real Flight SQL server for the tests of arrow-device/adbc: arrow-go's
 * example `sqlite_flightsql_server` (a Flight SQL server over an in-memory
 * SQLite database), built by test/adbc/setup-flightsql-server.sh into
 * .build/flightsql/bin. Started on the loopback interface with `-port 0`:
 * the kernel picks a free port and the server prints the address it took
 * (`Starting SQLite Flight SQL Server on 127.0.0.1:<port> ...`), which is
 * read from its stdout. `stop()` ends it (SIGTERM, which it handles), `kill()`
 * ends it hard (SIGKILL, for the fault tests); it is killed at process exit
 * if a test run dies first.
 *
 * `ADBC_FLIGHTSQL_SERVER` overrides the binary's place.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { findBuilt } from './drivers.js';

export interface FlightSqlServer {
  /** `grpc://127.0.0.1:<port>`: what the Flight SQL driver's `uri` option takes. */
  uri: string;
  port: number;
  /** Ends the server (SIGTERM) and waits for it to exit. Idempotent. */
  stop(): Promise<void>;
  /** Ends the server at once (SIGKILL: no goodbye on its connections) and waits for it to exit. Idempotent. */
  kill(): Promise<void>;
}


export const flightSqlServerPath = process.env.ADBC_FLIGHTSQL_SERVER || findBuilt(join('flightsql', 'bin', process.platform === 'win32' ? 'sqlite_flightsql_server.exe' : 'sqlite_flightsql_server'));

/** Why no server can be started here, or undefined. */
export function flightSqlServerMissing(): string | undefined {
  if (!existsSync(flightSqlServerPath)) {
    return `the Flight SQL test server (arrow-go's sqlite_flightsql_server) not found at ${flightSqlServerPath}: run \`npm run setup:adbc\` with Go installed`;
  }
  return undefined;
}

/** The address line the server prints once it listens. */
const LISTENING = /Starting SQLite Flight SQL Server on (\S+):(\d+)/;

/** Starts a server on 127.0.0.1 and a free port; rejects with its output when it does not start within 30 s. */
export function startFlightSql(): Promise<FlightSqlServer> {
  const child: ChildProcess = spawn(flightSqlServerPath, ['-host', '127.0.0.1', '-port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const onExit = (): void => {
    child.kill('SIGKILL');
  };
  process.on('exit', onExit);
  const end = async (signal: NodeJS.Signals): Promise<void> => {
    process.removeListener('exit', onExit);
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  return new Promise<FlightSqlServer>((resolve, reject) => {
    let settled = false;
    const fail = (why: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void end('SIGKILL');
      reject(new Error(`the Flight SQL server (${flightSqlServerPath}) did not start: ${why}\n${output}`));
    };
    const timer = setTimeout(() => fail('no address printed within 30 s'), 30_000);
    child.once('error', (e) => fail(e.message));
    child.once('exit', (code, signal) => fail(`it exited (${signal ?? code})`));
    child.stderr!.on('data', (d: Buffer) => {
      output += d.toString();
    });
    child.stdout!.on('data', (d: Buffer) => {
      output += d.toString();
      const m = LISTENING.exec(output);
      if (!m || settled) return;
      settled = true;
      clearTimeout(timer);
      const port = Number(m[2]);
      resolve({ uri: `grpc://127.0.0.1:${port}`, port, stop: () => end('SIGTERM'), kill: () => end('SIGKILL') });
    });
  });
}
