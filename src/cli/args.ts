// Commander argument parsers over the one settings module (src/util/settings.ts):
// a bad value is a one-line usage error naming the flag, the value and what is allowed.

import { InvalidArgumentError } from "commander";
import { PROCESS_LIMITS } from "../policy/index.js";
import { SettingError, parseChoice, parseDecimal, parseDuration, parseInteger, type DurationRange, type IntRange } from "../util/settings.js";
import { parseSince } from "../util/log-time.js";
import { CliError, EXIT } from "./errors.js";
import { parseLabelPair, type LabelPair } from "../lifecycle/labels.js";

function wrap<T>(what: string, parse: (what: string, raw: string) => T): (raw: string) => T {
  return (raw) => {
    try {
      return parse(what, raw);
    } catch (err) {
      if (err instanceof SettingError) throw new InvalidArgumentError(err.message);
      throw err;
    }
  };
}

export const intArg = (flag: string, range: IntRange) => wrap(flag, (w, r) => parseInteger(w, r, range));
export const decimalArg = (flag: string, range: IntRange) => wrap(flag, (w, r) => parseDecimal(w, r, range));
export const secondsArg = (flag: string, range: DurationRange) => wrap(flag, (w, r) => parseDuration(w, r, range));
export const choiceArg = <T extends string>(flag: string, allowed: readonly T[]) => wrap(flag, (w, r) => parseChoice(w, r, allowed));
/** `--since`: an RFC 3339 time or a duration back from now (90s, 10m, 2h, 7d), as the canonical time it names. */
export const sinceArg = (flag: string) => wrap(flag, (w, r) => parseSince(w, r, new Date()));

/** `--label KEY=VALUE`, repeatable: the pairs so far plus this one (checked as the gateway checks it). */
export function labelArg(flag: string): (raw: string, acc: LabelPair[] | undefined) => LabelPair[] {
  return (raw, acc) => {
    const p = parseLabelPair(raw);
    if (!p.ok) throw new InvalidArgumentError(`${flag}: ${p.error}`);
    return [...(acc ?? []), p.pair];
  };
}

/** Runs a settings parse outside commander (environment, files): a SettingError is a usage error. */
export function setting<T>(parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    if (err instanceof SettingError) throw new CliError(err.message, EXIT.usage);
    throw err;
  }
}

export const PORT: IntRange = { min: 0, max: 65535 };
export const WAIT: DurationRange = { minS: 1, maxS: 86_400 };
export const SEQ: IntRange = { min: 0, max: Number.MAX_SAFE_INTEGER };
export const PAGE: IntRange = { min: 1, max: 10_000 };
export { PROCESS_LIMITS };
