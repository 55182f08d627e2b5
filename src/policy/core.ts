// The policy module without its YAML parser: validation of decoded values, evaluation, the
// resolved-address check, storage form. What the supervisor (and the wire protocol) import,
// so its bundle carries no YAML code; index.ts adds parsePolicyYaml for the gateway and CLI.
export type { Policy, NetworkRule, Endpoint, HttpRule, DenyEntry, ProcessLimits, Protocol, HttpMethod } from "./schema.js";
export { PROTOCOLS, HTTP_METHODS, PROCESS_LIMITS, ENFORCEMENT_MODES } from "./schema.js";
export { policyFromObject, defaultPolicy, type PolicyParse } from "./from-object.js";
export { nameDecision, DNS_AUDIT_RULE, type NameDecision } from "./dns.js";
export { evaluate, AUDIT_MODE_RULE, type EgressRequest, type Decision, type DenyReason, type WouldDeny } from "./evaluate.js";
export { decideTunnel, tunnelStaysOpen, tunnelKind, type TunnelDecision, type TunnelKind } from "./tunnel.js";
export { checkResolvedAddress, hostAddressSet, NO_HOST_ADDRESSES, type AddressCheck, type HostAddresses } from "./address.js";
export { overrideMethods, OVERRIDE_HEADERS, OVERRIDE_PARAMETER } from "./override.js";
export { hostMatches, validateHostPattern, normalizeRequestHost } from "./hosts.js";
export { pathMatches, validatePathGlob } from "./paths.js";
export { parseCidr, formatCidr, cidrContains, parseIp, formatIp, unmapIPv4, type Cidr, type IpAddress } from "./cidr.js";
export { serializePolicy, policyHash, canonicalJson, changedFixedSections } from "./canonical.js";
export { PLACEHOLDER_PREFIX, placeholderFor, checkSecretName, SECRET_NAME_RE, SECRET_NAME_RULE, CREDENTIAL_LIMITS, isHeaderInjection, templateSecrets, type Credential, type PlaceholderBinding, type HeaderInjection } from "./credentials.js";
export { referencedSecrets, secretBindings, credentialScope, NO_CREDENTIALS, type CredentialScope, type SecretBinding } from "./credential-scope.js";
