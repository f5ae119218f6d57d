// Splits the editor's perflsp settings by where they were set, so the server knows their origin:
// user settings go in initializationOptions (user-level), workspace and folder settings answer
// workspace/configuration (workspace-level; the server ignores trusted-only ones there unless the
// workspace is trusted). Defaults are never sent: they are the server's own. No `vscode` import.

export interface Inspected {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/** Settings only the extension reads (`perflsp.python.path`, `perflsp.trace.server`). */
export const CLIENT_ONLY = ["python.", "trace."];

export type Nested = Record<string, unknown>;

function setPath(target: Nested, dotted: string, value: unknown): void {
  const parts = dotted.split(".");
  let node = target;
  for (const part of parts.slice(0, -1)) {
    node[part] = node[part] && typeof node[part] === "object" ? node[part] : {};
    node = node[part] as Nested;
  }
  node[parts[parts.length - 1]] = value;
}

/** `keys`: setting names without the `perflsp.` prefix, e.g. `gpus`, `llm.baseUrl`. */
export function splitByOrigin(keys: string[], inspect: (key: string) => Inspected | undefined): { user: Nested; workspace: Nested } {
  const user: Nested = {};
  const workspace: Nested = {};
  for (const key of keys) {
    if (CLIENT_ONLY.some((prefix) => key.startsWith(prefix))) {
      continue;
    }
    const found = inspect(key);
    if (!found) {
      continue;
    }
    if (found.globalValue !== undefined) {
      setPath(user, key, found.globalValue);
    }
    const local = found.workspaceFolderValue !== undefined ? found.workspaceFolderValue : found.workspaceValue;
    if (local !== undefined) {
      setPath(workspace, key, local);
    }
  }
  return { user, workspace };
}

/** Setting names (without `perflsp.`) from package.json's `contributes.configuration`. */
export function contributedKeys(packageJson: unknown): string[] {
  const configuration = (packageJson as { contributes?: { configuration?: unknown } })?.contributes?.configuration;
  const sections = Array.isArray(configuration) ? configuration : [configuration];
  const keys: string[] = [];
  for (const section of sections) {
    const properties = (section as { properties?: Record<string, unknown> } | undefined)?.properties ?? {};
    keys.push(...Object.keys(properties).filter((k) => k.startsWith("perflsp.")).map((k) => k.slice("perflsp.".length)));
  }
  return keys;
}

export function sameSettings(a: Nested, b: Nested): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
