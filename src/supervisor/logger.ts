// JSON-lines logger for the supervisor. No pino: the supervisor is bundled to a
// single file and one JSON.stringify per line is all it needs. stdout becomes
// visible to the gateway later, so every line must be a complete JSON object.

export type LogFields = Record<string, unknown>;

export interface Logger {
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Writes a structured record (e.g. an audit event) as its own line, unchanged. */
  record(obj: object): void;
}

export interface LineSink {
  write(line: string): unknown;
}

export function createJsonLogger(sink: LineSink = process.stdout): Logger {
  const emit = (level: string, msg: string, fields?: LogFields): void => {
    sink.write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }) + "\n");
  };
  return {
    info: (msg, fields) => emit("info", msg, fields),
    warn: (msg, fields) => emit("warn", msg, fields),
    error: (msg, fields) => emit("error", msg, fields),
    record: (obj) => sink.write(JSON.stringify(obj) + "\n"),
  };
}

/** A logger that drops everything (tests that assert on audit events instead). */
export const silentLogger: Logger = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  record: () => undefined,
};

export function errorFields(err: unknown): LogFields {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === undefined ? { error: err.message } : { error: err.message, code };
  }
  return { error: String(err) };
}
