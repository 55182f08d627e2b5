// A throwaway PostgreSQL 15 cluster for tests (a real server, Debian's postgresql-15):
// initdb as the `postgres` user (initdb refuses root) into a fresh directory, served on a
// Unix socket in that directory only (listen_addresses empty: no TCP port to collide with
// another test file's cluster, nothing reachable from the network), fsync off (a test's
// data need not survive a power cut). stop() removes it; restart() is a real server restart.

import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

const BIN = "/usr/lib/postgresql/15/bin";

export interface PostgresCluster {
  /** A connection URL for the `sandgate` superuser's database `sandgate`, over the socket. */
  url: string;
  /** The socket directory (the URL's host). */
  dir: string;
  /** A new, empty database on this cluster, and its URL (one per test: nothing shared between them). */
  createDatabase(name: string): string;
  /** Stop the server (fast: open sessions are ended) and start it again on the same data. */
  restart(): void;
  /** Stop the server, leaving its data (start() brings it back). */
  stopServer(): void;
  startServer(): void;
  /** Stop it and remove its directory. */
  stop(): void;
}

export function postgresAvailable(): boolean {
  return existsSync(join(BIN, "initdb"));
}

function asPostgres(args: string[]): string {
  return execFileSync("runuser", ["-u", "postgres", "--", ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

export function startPostgres(): PostgresCluster {
  const dir = mkdtempSync(join(tmpdir(), "sandgate-pg-"));
  const pw = execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim();
  const pg = execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim();
  chownSync(dir, Number(pw), Number(pg));
  const data = join(dir, "data");
  asPostgres([join(BIN, "initdb"), "-D", data, "-U", "sandgate", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"]);
  const opts = `-k ${dir} -c listen_addresses= -p 5432 -c fsync=off -c full_page_writes=off -c max_connections=200`;
  const startServer = (): void => {
    asPostgres([join(BIN, "pg_ctl"), "-D", data, "-l", join(dir, "log"), "-w", "-t", "60", "-o", opts, "start"]);
  };
  const stopServer = (): void => {
    asPostgres([join(BIN, "pg_ctl"), "-D", data, "-w", "-t", "60", "-m", "fast", "stop"]);
  };
  startServer();
  const psql = (sql: string): void => {
    execFileSync("/usr/bin/psql", ["-h", dir, "-U", "sandgate", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q", "-c", sql], { stdio: ["ignore", "pipe", "pipe"] });
  };
  const urlOf = (db: string): string => `postgres://sandgate@localhost/${db}?host=${encodeURIComponent(dir)}`;
  psql("CREATE DATABASE sandgate");
  return {
    url: urlOf("sandgate"),
    dir,
    createDatabase(name) {
      psql(`CREATE DATABASE "${name}"`);
      return urlOf(name);
    },
    restart() {
      stopServer();
      startServer();
    },
    stopServer,
    startServer,
    stop() {
      try {
        stopServer();
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One statement on its own connection (a test's look into the database, or its fault: pg_terminate_backend). */
export async function pgQuery<R extends pg.QueryResultRow>(url: string, text: string): Promise<R[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<R>(text)).rows;
  } finally {
    await c.end();
  }
}
