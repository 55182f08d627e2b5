// The two images Sandgate runs, built locally by `docker import` (no registry).
//
// Each image is tagged with a content hash of its inputs (node binary, its libraries,
// busybox and the clients (workload-clients.ts) or the supervisor bundle, the layout
// version and the image config), so a
// rebuild happens only when an input changed. The tar of each image is cached under
// .cache/images/ so that a fresh daemon (one per test file) imports it in about a second
// without assembling the rootfs again.
import { createReadStream, existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { PROJECT_ROOT, resolveOrigDstAddon, resolveSupervisorBundle } from "./supervisor-bundle.js";
import type { EngineResult } from "./engine/result.js";
import {
  IMAGE_NODE_PATH,
  IMAGE_PATH_ENV,
  IMAGE_SUPERVISOR_PATH,
  DEFAULT_IDS,
  assembleRootfs,
  layoutHash,
  supervisorLayout,
  tarRootfs,
} from "./rootfs.js";
import type { ImageKind, RootfsLayout } from "./rootfs.js";
import { defaultWorkloadLayout, type WorkloadInputs } from "./workload-clients.js";
import type { RoleIds } from "./host-ids.js";

export const WORKLOAD_REPO = "sandgate-workload";
export const SUPERVISOR_REPO = "sandgate-supervisor";
export const DEFAULT_IMAGE_CACHE_DIR = join(PROJECT_ROOT, ".cache", "images");

/** What ensureImages needs of the Engine API client (EngineClient has it). */
export interface ImageEngine {
  inspectImage(ref: string): Promise<EngineResult<{ Id: string }>>;
  importImage(tar: Readable, opts: { repo: string; tag: string; changes?: string[] }): Promise<EngineResult<{ imageId: string }>>;
}

export interface ImageRef {
  ref: string;
  id: string;
}

export interface EnsureImagesOptions extends WorkloadInputs {
  /** Default: the prebuilt bundle (dist/supervisor/supervisor.mjs, made by `npm run build`). */
  supervisorBundlePath?: string;
  /** Default: the prebuilt addon (dist/supervisor/orig-dst.node, made by `npm run build`). */
  origDstAddonPath?: string;
  /** Where image tars are cached. Default: <project>/.cache/images. */
  cacheDir?: string;
  onProgress?: (msg: string) => void;
}

export interface EnsureImagesResult {
  supervisor: ImageRef;
  workload: ImageRef;
  /** Refs imported by this call (missing in the daemon). */
  built: string[];
  /** Refs whose rootfs had to be assembled and tarred (no cached tar). */
  assembled: string[];
}

/** Image config set at import (Dockerfile instructions that `docker import --change` accepts). */
export function imageChanges(kind: ImageKind, hash: string, ids: RoleIds = DEFAULT_IDS): string[] {
  const label = `LABEL org.sandgate.image=${kind} org.sandgate.content-hash=${hash}`;
  if (kind === "workload") {
    return [`USER ${ids.workload}:${ids.workload}`, "WORKDIR /sandbox", `ENV PATH=${IMAGE_PATH_ENV}`, "ENV HOME=/sandbox", label];
  }
  return [
    `USER ${ids.supervisor}:${ids.supervisor}`,
    "WORKDIR /opt/sandgate",
    `ENV PATH=${IMAGE_PATH_ENV}`,
    `CMD ["${IMAGE_NODE_PATH}", "${IMAGE_SUPERVISOR_PATH}"]`,
    label,
  ];
}

export interface ImagePlan {
  /** An ImageKind for the product images; a test image (test/support) names its own. */
  kind: string;
  repo: string;
  hash: string;
  ref: string;
  changes: string[];
  layout: RootfsLayout;
  tarPath: string;
}

/** Describe and hash one image without building anything. */
export async function planImage(kind: ImageKind, opts: EnsureImagesOptions = {}): Promise<ImagePlan> {
  const layout =
    kind === "workload"
      ? await defaultWorkloadLayout(opts)
      : await supervisorLayout(opts.supervisorBundlePath ?? resolveSupervisorBundle(), { ...opts, origDstAddonPath: opts.origDstAddonPath ?? resolveOrigDstAddon() });
  const repo = kind === "workload" ? WORKLOAD_REPO : SUPERVISOR_REPO;
  // The changes carry the hash label, so hash what they say without it.
  const hash = await layoutHash(layout, imageChanges(kind, "", opts.ids));
  const tag = hash.slice(0, 12);
  const cacheDir = opts.cacheDir ?? DEFAULT_IMAGE_CACHE_DIR;
  return {
    kind,
    repo,
    hash,
    ref: `${repo}:${tag}`,
    changes: imageChanges(kind, hash, opts.ids),
    layout,
    tarPath: join(cacheDir, `${kind}-${tag}.tar`),
  };
}

function describeFailure(r: Exclude<EngineResult<unknown>, { kind: "ok" }>): string {
  return r.kind === "docker" ? `docker error HTTP ${r.status}: ${r.message}` : `transport failure ${r.code}: ${r.message}`;
}

/** The tar of a plan: the cached file, or assembled now (and older tars of the same kind removed). */
async function ensureTar(plan: ImagePlan, progress: (msg: string) => void): Promise<boolean> {
  if (existsSync(plan.tarPath)) return false;
  const cacheDir = dirname(plan.tarPath);
  await mkdir(cacheDir, { recursive: true });
  const work = await mkdtemp(join(cacheDir, `.rootfs-${plan.kind}-`));
  try {
    progress(`assembling ${plan.kind} rootfs`);
    await assembleRootfs(plan.layout, join(work, "root"));
    progress(`writing ${plan.tarPath}`);
    await tarRootfs(plan.layout, join(work, "root"), plan.tarPath);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  const mine = `${plan.kind}-${plan.ref.split(":")[1]!}.tar`;
  for (const f of await readdir(cacheDir)) {
    if (f.startsWith(`${plan.kind}-`) && f.endsWith(".tar") && f !== mine) await rm(join(cacheDir, f), { force: true });
  }
  return true;
}

/**
 * One planned image in the daemon: present already, or imported from its cached tar
 * (assembled first when there is none). Also used by test images built from their own layouts.
 */
export async function ensurePlannedImage(
  engine: ImageEngine,
  plan: ImagePlan,
  progress: (msg: string) => void = (): void => undefined,
): Promise<{ image: ImageRef; built: boolean; assembled: boolean }> {
  const found = await engine.inspectImage(plan.ref);
  if (found.kind === "ok") {
    progress(`${plan.ref} is present`);
    return { image: { ref: plan.ref, id: found.body.Id }, built: false, assembled: false };
  }
  if (found.kind !== "docker" || found.status !== 404) {
    throw new Error(`inspecting image ${plan.ref} failed: ${describeFailure(found)}`);
  }
  const assembled = await ensureTar(plan, progress);
  if (!assembled) progress(`importing ${plan.ref} from cached ${plan.tarPath}`);
  const imported = await engine.importImage(createReadStream(plan.tarPath), { repo: plan.repo, tag: plan.ref.split(":")[1]!, changes: plan.changes });
  if (imported.kind !== "ok") throw new Error(`importing image ${plan.ref} failed: ${describeFailure(imported)}`);
  progress(`imported ${plan.ref} (${imported.body.imageId.slice(0, 19)})`);
  return { image: { ref: plan.ref, id: imported.body.imageId }, built: true, assembled };
}

async function ensureImage(engine: ImageEngine, plan: ImagePlan, progress: (msg: string) => void, result: EnsureImagesResult): Promise<ImageRef> {
  const r = await ensurePlannedImage(engine, plan, progress);
  if (r.assembled) result.assembled.push(plan.ref);
  if (r.built) result.built.push(plan.ref);
  return r.image;
}

/** Make sure both images exist in the daemon; import (from cache, or assembled) only what is missing. */
export async function ensureImages(engine: ImageEngine, opts: EnsureImagesOptions = {}): Promise<EnsureImagesResult> {
  const progress = opts.onProgress ?? ((): void => undefined);
  const supervisorBundlePath = opts.supervisorBundlePath ?? resolveSupervisorBundle();
  const [workloadPlan, supervisorPlan] = await Promise.all([planImage("workload", opts), planImage("supervisor", { ...opts, supervisorBundlePath })]);
  const result: EnsureImagesResult = {
    workload: { ref: workloadPlan.ref, id: "" },
    supervisor: { ref: supervisorPlan.ref, id: "" },
    built: [],
    assembled: [],
  };
  result.workload = await ensureImage(engine, workloadPlan, progress, result);
  result.supervisor = await ensureImage(engine, supervisorPlan, progress, result);
  return result;
}
