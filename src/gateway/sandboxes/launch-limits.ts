// How many sandboxes are launched at once (gateway start --launch-concurrency). On a
// small host, twenty launches at once made the Docker daemon too slow to answer within
// its call deadlines; a few at a time finish sooner, each of them and all of them.
export const DEFAULT_LAUNCH_CONCURRENCY = 4;
export const LAUNCH_CONCURRENCY_RANGE = { min: 1, max: 64 } as const;
