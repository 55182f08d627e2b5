// `await using` needs Symbol.asyncDispose at run time: TypeScript's downlevel helper
// throws without it, esbuild's falls back to Symbol.for("Symbol.asyncDispose"). Node
// 20 defines it in its main realm, not in every realm (a vm context has none); this
// defines it where missing, as that same registered symbol, so both helpers and our
// classes agree on one symbol.

type DisposalSymbols = { asyncDispose?: symbol; dispose?: symbol };

/** Defines Symbol.asyncDispose and Symbol.dispose on `symbol` where they are missing. */
export function polyfillDisposal(symbol: object = Symbol): void {
  const s = symbol as DisposalSymbols;
  if (s.asyncDispose === undefined) Object.defineProperty(symbol, "asyncDispose", { value: Symbol.for("Symbol.asyncDispose") });
  if (s.dispose === undefined) Object.defineProperty(symbol, "dispose", { value: Symbol.for("Symbol.dispose") });
}

polyfillDisposal();
