import assert from "node:assert/strict";
import { test } from "node:test";
import { contributedKeys, sameSettings, splitByOrigin } from "../src/settingsLayers";

test("user and workspace values go to separate layers; defaults and client-only settings to neither", () => {
  const values: Record<string, { globalValue?: unknown; workspaceValue?: unknown; workspaceFolderValue?: unknown }> = {
    gpus: { globalValue: ["h100"], workspaceValue: ["a100"] },
    "llm.baseUrl": { globalValue: "http://127.0.0.1:11434" },
    "llm.model": { workspaceValue: "m1", workspaceFolderValue: "m2" },
    "profiling.enabled": {}, // only a default
    "python.path": { globalValue: "/usr/bin/python3" },
    "trace.server": { workspaceValue: "verbose" },
  };
  const { user, workspace } = splitByOrigin(Object.keys(values), (k) => values[k]);
  assert.deepEqual(user, { gpus: ["h100"], llm: { baseUrl: "http://127.0.0.1:11434" } });
  assert.deepEqual(workspace, { gpus: ["a100"], llm: { model: "m2" } });
});

test("falsy values set explicitly are kept", () => {
  const { workspace } = splitByOrigin(["enable", "debounceMs"], (k) => (k === "enable" ? { workspaceValue: false } : { workspaceValue: 0 }));
  assert.deepEqual(workspace, { enable: false, debounceMs: 0 });
});

test("keys come from package.json's contributed configuration", () => {
  const pkg = { contributes: { configuration: { properties: { "perflsp.enable": {}, "perflsp.llm.baseUrl": {}, "other.x": {} } } } };
  assert.deepEqual(contributedKeys(pkg), ["enable", "llm.baseUrl"]);
  assert.ok(sameSettings({ a: 1 }, { a: 1 }) && !sameSettings({ a: 1 }, { a: 2 }));
});
