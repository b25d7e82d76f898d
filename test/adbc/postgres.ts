/**
 * A real PostgreSQL server for the tests of arrow-device/adbc: Debian's
 * `postgresql` package (`.ci/run` installs it), started on the loopback
 * interface in a temporary data directory and stopped (and the directory
 * removed) by `stop()`, or at process exit if a test run dies first.
 * PostgreSQL refuses to run as root: as root, its commands run as the
 * `postgres` user the package creates.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface PostgresServer {
  /** `postgresql://postgres@127.0.0.1:<port>/postgres` */
  uri: string;
  stop(): void;
  /** Stops the server hard (`-m immediate`: every connection dropped) and starts it again on the same port. */
  restart(): void;
}

/** The directory of initdb and pg_ctl: on the PATH, else Debian's /usr/lib/postgresql/<version>/bin (newest). */
function binDir(): string | undefined {
  const which = spawnSync('sh', ['-c', 'command -v pg_ctl'], { encoding: 'utf8' });
  const fromPath = which.status === 0 ? which.stdout.trim() : '';
  if (fromPath && existsSync(join(fromPath, '..', 'initdb'))) return join(fromPath, '..');
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base).filter((v) => existsSync(join(base, v, 'bin', 'pg_ctl'))).sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(base, versions[0], 'bin');
}

/** A port free on 127.0.0.1 now (taken and given back). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** Why no server can be started here, or undefined. */
export function postgresMissing(): string | undefined {
  if (!binDir()) return 'PostgreSQL (initdb, pg_ctl) not installed: apt-get install postgresql (.ci/run does)';
  if (process.getuid?.() === 0 && spawnSync('id', ['-u', 'postgres']).status !== 0) return 'running as root and there is no postgres user to run PostgreSQL as';
  return undefined;
}

/** Starts a server; throws with initdb's or pg_ctl's output when it cannot. */
export async function startPostgres(): Promise<PostgresServer> {
  const bin = binDir();
  if (!bin) throw new Error(postgresMissing());
  const dir = mkdtempSync(join(tmpdir(), 'arrow-device-pg-'));
  const data = join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  const run = (tool: string, args: string[]): string => {
    const cmd = asRoot ? 'runuser' : join(bin, tool);
    const argv = asRoot ? ['-u', 'postgres', '--', join(bin, tool), ...args] : args;
    try {
      return execFileSync(cmd, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
    } catch (e) {
      const err = e as { stdout?: string; stderr?: string; message: string };
      throw new Error(`${tool} ${args.join(' ')} failed: ${err.message}\n${err.stdout ?? ''}${err.stderr ?? ''}`);
    }
  };
  let stopped = false;
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    process.removeListener('exit', stop);
    try {
      if (existsSync(join(data, 'postmaster.pid'))) run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  process.on('exit', stop);
  try {
    run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-locale', '--no-sync']);
    const port = await freePort();
    const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off`;
    run('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', '-o', opts, 'start']);
    const restart = (): void => {
      run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      run('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', '-o', opts, 'start']);
    };
    return { uri: `postgresql://postgres@127.0.0.1:${port}/postgres`, stop, restart };
  } catch (e) {
    stop();
    throw e;
  }
}
