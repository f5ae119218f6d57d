import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { chooseInterpreter, diagnose, expandPath, installSource, probe } from "../src/interpreter";

test("the setting wins over the Python extension and the default", () => {
  assert.deepEqual(chooseInterpreter(" /opt/py/bin/python ", ["/env/bin/python"]), { command: ["/opt/py/bin/python"], source: "setting" });
  assert.deepEqual(chooseInterpreter("", ["/env/bin/python"]), { command: ["/env/bin/python"], source: "python-extension" });
  assert.deepEqual(chooseInterpreter(undefined, undefined), { command: ["python3"], source: "default" });
  assert.deepEqual(chooseInterpreter(undefined, []), { command: ["python3"], source: "default" });
});

test("paths expand ~, ${userHome} and ${workspaceFolder}", () => {
  assert.equal(expandPath("~/venv/bin/python", "/ws", "/home/u"), "/home/u/venv/bin/python");
  assert.equal(expandPath("${workspaceFolder}/.venv/bin/python", "/ws", "/home/u"), "/ws/.venv/bin/python");
  assert.equal(expandPath("${userHome}/py", undefined, "/home/u"), "/home/u/py");
});

test("a missing interpreter is named with where it came from", () => {
  const p = diagnose({ command: ["/nope/python"], source: "setting" }, { code: "ENOENT" }, "");
  assert.equal(p.kind, "interpreter-missing");
  assert.match(p.message, /\/nope\/python/);
  assert.match(p.message, /perflsp\.python\.path setting/);
  assert.match(p.message, /not found/);
});

const WHEEL = "/ext/python/perflsp-0.1.0-py3-none-any.whl";

test("a missing module gives the pip command that installs the bundled wheel", () => {
  const p = diagnose({ command: ["/usr/bin/python3"], source: "default" }, { code: 1 }, "Traceback...\nModuleNotFoundError: No module named 'perflsp'\n", WHEEL);
  assert.equal(p.kind, "perflsp-missing");
  assert.equal(p.fixCommand, `/usr/bin/python3 -m pip install ${WHEEL}`);
  assert.match(p.message, /not installed in \/usr\/bin\/python3/);
});

test("without an install source there is no command to run, and the message says where perflsp comes from", () => {
  const p = diagnose({ command: ["/usr/bin/python3"], source: "default" }, { code: 1 }, "ModuleNotFoundError: No module named 'perflsp'\n");
  assert.equal(p.fixCommand, undefined);
  assert.match(p.message, /-m pip install <a clone of the perflsp repository>/);
  assert.doesNotMatch(p.message, /pip install perflsp\b/); // not on PyPI: that command would fail
});

test("the install source: the wheel in the .vsix, else the checkout the extension runs from", () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "perflsp-source-"));
  const ext = path.join(root, "vscode-extension");
  fs.mkdirSync(path.join(ext, "python"), { recursive: true });
  assert.equal(installSource(ext), undefined);
  fs.writeFileSync(path.join(root, "pyproject.toml"), '[project]\nname = "perflsp"\n');
  assert.equal(installSource(ext), root);
  fs.writeFileSync(path.join(ext, "python", "perflsp-0.1.0-py3-none-any.whl"), "");
  assert.equal(installSource(ext), path.join(ext, "python", "perflsp-0.1.0-py3-none-any.whl"));
  fs.rmSync(root, { recursive: true });
});

test("a missing dependency of perflsp is named, with a reinstall command", () => {
  const p = diagnose({ command: ["/v/bin/python"], source: "setting" }, { code: 1 }, "0.1.0\nTraceback...\nModuleNotFoundError: No module named 'pygls'\n", WHEEL);
  assert.equal(p.kind, "perflsp-broken");
  assert.match(p.message, /the module 'pygls' it needs is missing/);
  assert.equal(p.fixCommand, `/v/bin/python -m pip install ${WHEEL} --force-reinstall`);
});

test("paths with spaces are quoted in the fix command", () => {
  const p = diagnose({ command: ["/My Envs/py"], source: "setting" }, { code: 1 }, "ModuleNotFoundError: No module named 'perflsp'", "/My Ext/perflsp.whl");
  assert.equal(p.fixCommand, "'/My Envs/py' -m pip install '/My Ext/perflsp.whl'");
});

test("probe runs a real interpreter: missing binary, missing module, and success", async () => {
  const missing = await probe({ command: [path.join(os.tmpdir(), "no-such-python-xyz")], source: "setting" });
  assert.equal(missing.ok, false);
  assert.equal(missing.problem?.kind, "interpreter-missing");

  // A fake "python" that fails the way a Python without perflsp does.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "perflsp-probe-"));
  const fake = path.join(dir, "python");
  fs.writeFileSync(fake, "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'perflsp'\" >&2\nexit 1\n", { mode: 0o755 });
  const noModule = await probe({ command: [fake], source: "setting" });
  assert.equal(noModule.problem?.kind, "perflsp-missing");

  const good = path.join(dir, "good");
  fs.writeFileSync(good, "#!/bin/sh\necho 0.1.0\n", { mode: 0o755 });
  const ok = await probe({ command: [good], source: "setting" });
  assert.deepEqual(ok, { ok: true, version: "0.1.0" });
  fs.rmSync(dir, { recursive: true });
});
