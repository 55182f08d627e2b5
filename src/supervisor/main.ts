// Supervisor entry point (bundled to one file for the companion container).
import { fileURLToPath } from "node:url";
import { LAUNCH_CONFIG_PATH } from "../protocol/launch.js";
import { createJsonLogger, errorFields } from "./logger.js";
import { startSupervisor } from "./supervisor.js";

const logger = createJsonLogger();
const configPath = process.env.SANDGATE_LAUNCH_CONFIG ?? LAUNCH_CONFIG_PATH;

process.on("unhandledRejection", (err) => {
  logger.error("unhandled rejection", errorFields(err));
  process.exitCode = 1;
});

// The transparent path's addon sits beside this bundle in the image (orig-dst.node).
const origDstAddon = fileURLToPath(new URL("./orig-dst.node", import.meta.url));

startSupervisor({ configPath, logger, origDstAddon }).then(
  (supervisor) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals): void => {
      if (stopping) return;
      stopping = true;
      logger.info("shutting down", { signal });
      supervisor.close().then(
        () => {
          logger.info("stopped", { signal });
          // Exit by draining the event loop: stdout gets flushed first.
          process.exitCode ??= 0;
        },
        (err: unknown) => {
          logger.error("shutdown failed", errorFields(err));
          process.exitCode = 1;
        },
      );
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  },
  (err: unknown) => {
    logger.error("supervisor failed to start", errorFields(err));
    process.exitCode = 1;
  },
);
