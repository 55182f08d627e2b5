// The vocabulary of policy proposals (a change an agent proposes and a person decides):
// their states and the bounds of their free-text fields. Pure, so the API's contracts,
// the store and the service all name the same values.

export const PROPOSAL_STATES = ["pending", "approved", "rejected", "superseded"] as const;
export type ProposalState = (typeof PROPOSAL_STATES)[number];

/** Who proposed or decided: a short free text the client gives ("mcp", "cli:alice"). */
export const BY_MAX = 64;
/** A proposal's reason, or a rejection's. */
export const REASON_MAX = 1000;
