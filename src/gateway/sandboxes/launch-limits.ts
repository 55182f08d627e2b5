// How many sandboxes are launched at once (gateway start --launch-concurrency). On a
// small host, twenty launches at once made the Docker daemon too slow to answer within
// its call deadlines; a few at a time finish sooner, each of them and all of them.
// Its range and default are declared in the settings table (../settings.ts).
import { DEFAULT_SETTINGS } from "../settings.js";

export const DEFAULT_LAUNCH_CONCURRENCY = DEFAULT_SETTINGS.launchConcurrency;
