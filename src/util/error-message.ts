// The one line an error gives, whatever was thrown (an Error's message, else its text).
export const errorMessage = (err: unknown): string => (err instanceof Error ? err.message : String(err));
