// Whether the runtime can launch sandboxes: images, shared networks and the
// supervisors' endpoint. The first attempt is awaited; if it fails, it is retried
// in the background, so a gateway can start, adopt its sandboxes and wait while
// Docker is away.

import type { Logger } from "pino";
import type { ComputeDriver } from "../../driver/contract.js";
import type { ControlPlane } from "../control/control-plane.js";
import { ApiError } from "../errors.js";
import { errorMessage } from "../../util/error-message.js";
import { pause } from "../../util/pause.js";

export class RuntimeGate {
  /** Why the runtime cannot launch sandboxes yet; null when ready. */
  #problem: string | null = "the runtime is being prepared";
  #retrying: Promise<void> | undefined;
  #closed = false;
  #wake: AbortController | undefined;

  constructor(
    private readonly driver: ComputeDriver,
    private readonly control: ControlPlane | null,
    private readonly log: Logger,
  ) {}

  async prepare(onProgress?: (msg: string) => void, retryMs = 2_000): Promise<void> {
    if (await this.#attempt(onProgress)) return;
    this.#retrying = (async () => {
      while (!this.#closed && !(await this.#attempt(onProgress))) {
        this.#wake = new AbortController();
        await pause(retryMs, this.#wake.signal);
      }
    })();
  }

  async #attempt(onProgress?: (msg: string) => void): Promise<boolean> {
    try {
      await this.driver.prepare(onProgress);
      const address = this.driver.controlAddress();
      if (this.control && address) await this.control.listen(address);
      this.#problem = null;
      return true;
    } catch (err) {
      this.#problem = errorMessage(err);
      this.log.warn({ err: this.#problem }, "runtime not ready; retrying in the background");
      return false;
    }
  }

  status(): { ready: boolean; problem: string | null } {
    return { ready: this.#problem === null, problem: this.#problem };
  }

  /** Throws 503 while the runtime cannot launch sandboxes. */
  assertReady(): void {
    if (this.#problem !== null) throw new ApiError("unavailable", `the runtime is not ready: ${this.#problem}`);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#wake?.abort();
    await this.#retrying;
  }
}
