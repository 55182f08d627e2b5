// An exec whose command never started: Docker then writes its runtime's error, one line
// ending "\r\n", into the exec's own stdout stream (the daemon's exec-start handler writes
// err.Error() there once the stream is attached) and records exit code 126 or 127, e.g.
//   OCI runtime exec failed: exec failed: unable to start container process: exec: "nosuchcmd": executable file not found in $PATH: unknown
// A user would read that as the command's output. Here it is recognized and said as a shell
// says it, one line on stderr with the shell's exit code:
//   sandgate: nosuchcmd: command not found in the sandbox   (127)

/** How Docker's line starts (runc and crun alike). */
export const OCI_EXEC_FAILED = "OCI runtime exec failed: ";

/** Output longer than this is a command's, never Docker's one line. */
const LINE_MAX_BYTES = 4096;

export interface StartFailure {
  /** What to print on stderr instead, with its newline. */
  line: string;
  /** A shell's: 127 when the command is not there, 126 when it is but cannot be run. */
  exitCode: number;
}

/**
 * The start failure `output` (an exec's whole stdout) reports for the command `cmd` (its
 * argv[0] as given), or null when it is not Docker's line. The runtime's wording varies (runc,
 * crun, versions); what is not one of the known causes is passed on in Docker's words.
 */
export function execStartFailure(output: string, cmd: string): StartFailure | null {
  const m = /^OCI runtime exec failed: ([^\n]*?)\r?\n?$/.exec(output);
  if (!m) return null;
  const said = m[1]!;
  const at = (what: string, exitCode: number): StartFailure => ({ line: `sandgate: ${cmd}: ${what} in the sandbox\n`, exitCode });
  // runc: exec: "x": executable file not found in $PATH; crun: executable file `x` not found in $PATH
  if (/executable file .*not found/i.test(said)) return at("command not found", 127);
  // The rest only when they are about the command (as Docker decides 126 or 127), not, say, a
  // missing working directory ("chdir to cwd ... no such file or directory"): exec: "/x": stat /x: ...
  if (said.includes(`"${cmd}"`) || said.includes(`\`${cmd}\``)) {
    if (/no such file or directory/i.test(said)) return at("no such file", 127);
    if (/permission denied/i.test(said)) return at("permission denied", 126);
    if (/is a directory/i.test(said)) return at("is a directory", 126);
  }
  const why = said.replace(/^exec failed: /, "").replace(/^unable to start container process: /, "").replace(/: unknown$/, "");
  return { line: `sandgate: ${cmd}: could not be started in the sandbox: ${why}\n`, exitCode: 126 };
}

/**
 * Holds the first stdout bytes of an exec while they could still be Docker's line (they
 * begin as it does, and are one line at most LINE_MAX_BYTES long); passes them on, and all
 * that follows, as soon as they cannot be.
 */
export class StartFailureWatch {
  #held: Buffer[] | null = [];
  #size = 0;

  constructor(private readonly pass: (b: Buffer) => void) {}

  push(b: Buffer): void {
    if (this.#held === null) return this.pass(b);
    this.#held.push(b);
    this.#size += b.length;
    const text = Buffer.concat(this.#held).toString("latin1");
    const line = text.replace(/\r?\n$/, "");
    const mayBe = this.#size <= LINE_MAX_BYTES && !line.includes("\n") && (OCI_EXEC_FAILED.startsWith(line) || line.startsWith(OCI_EXEC_FAILED));
    if (!mayBe) this.release();
  }

  /** Passes on what is held: the command wrote something else (on stderr, say). */
  release(): void {
    const held = this.#held;
    this.#held = null;
    if (held && held.length > 0) this.pass(Buffer.concat(held));
  }

  /** At the end of the output: the start failure the held bytes report (then they are dropped), else null (they are passed on). */
  end(cmd: string): StartFailure | null {
    const held = this.#held;
    const failure = held && held.length > 0 ? execStartFailure(Buffer.concat(held).toString("utf8"), cmd) : null;
    if (failure) this.#held = null;
    else this.release();
    return failure;
  }
}
