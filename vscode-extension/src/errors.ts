// One readable line for anything thrown (an Error, a JSON-RPC error object, a string). No `vscode`
// import: unit-tested under plain Node.

export function errorMessage(err: unknown): string {
  if (err instanceof Error) {
    return err.message;
  }
  if (typeof err === "string") {
    return err;
  }
  if (err && typeof err === "object" && typeof (err as { message?: unknown }).message === "string") {
    return (err as { message: string }).message;
  }
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return "unknown error";
  }
}
