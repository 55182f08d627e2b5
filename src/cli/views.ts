// Types of what the gateway API returns, as the CLI reads it: the SDK's (src/sdk/types.ts).
export type { BoundaryView, ContainerIdentityView, EventView, SandboxSummaryView, SandboxView } from "../sdk/types.js";
