// Public API of the policy module: parsing, evaluation, the resolved-address check, storage form.
export * from "./core.js";
export { parsePolicyYaml } from "./parse.js";
