// The vocabulary of policy proposals (a change an agent proposes and a person decides):
// their states and the bounds of their free-text fields. Pure, so the API's contracts,
// the store and the service all name the same values.

export const PROPOSAL_STATES = ["pending", "approved", "rejected", "superseded"] as const;
export type ProposalState = (typeof PROPOSAL_STATES)[number];

/** Who proposed or decided: a short free text the client gives ("mcp", "cli:alice"). */
export const BY_MAX = 64;
/** A proposal's reason, or a rejection's. */
export const REASON_MAX = 1000;

/**
 * Characters text a person reads must not hold, besides the C0 controls (each caller
 * says which of those it allows): C1 controls, the bidirectional marks, embeddings,
 * overrides and isolates (Trojan Source: text shown in another order than it is), the
 * zero-width and invisible ones (text that hides or splits a word) and line and paragraph
 * separators. A regular-expression character class body.
 */
export const HIDDEN_CHARS = "\\u007f-\\u009f\\u061c\\u200b-\\u200f\\u2028\\u2029\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u2069\\ufeff";
