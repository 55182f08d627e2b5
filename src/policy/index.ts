// Public API of the policy module: parsing, evaluation, the resolved-address check, storage form.
export type { Policy, NetworkRule, Endpoint, HttpRule, DenyEntry, ProcessLimits, Protocol, HttpMethod } from "./schema.js";
export { PROTOCOLS, HTTP_METHODS, PROCESS_LIMITS } from "./schema.js";
export { parsePolicyYaml, policyFromObject, defaultPolicy, type PolicyParse } from "./parse.js";
export { evaluate, type EgressRequest, type Decision, type DenyReason } from "./evaluate.js";
export { checkResolvedAddress, type AddressCheck } from "./address.js";
export { hostMatches, validateHostPattern, normalizeRequestHost } from "./hosts.js";
export { pathMatches, validatePathGlob } from "./paths.js";
export { parseCidr, formatCidr, cidrContains, parseIp, type Cidr, type IpAddress } from "./cidr.js";
export { serializePolicy, policyHash, canonicalJson, changedFixedSections } from "./canonical.js";
