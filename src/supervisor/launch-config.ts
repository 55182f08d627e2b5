// Reads the launch configuration file (format and validation: src/protocol/launch.ts).
import { readFile } from "node:fs/promises";
import { parseLaunchConfig, type LaunchLoadResult } from "../protocol/launch.js";

export async function readLaunchConfig(path: string): Promise<LaunchLoadResult> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    return { ...parseLaunchConfig(undefined), errors: [`cannot read ${path}: ${(err as Error).message}`] };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return { ...parseLaunchConfig(undefined), errors: [`${path} is not valid JSON: ${(err as Error).message}`] };
  }
  return parseLaunchConfig(raw);
}
