import assert from "node:assert/strict";
import { test } from "node:test";
import { newProjectConfig, tomlStringArray, withGpus } from "../src/projectConfig";

test("a new .perflsp.toml names the GPUs and explains what trust gates", () => {
  const text = newProjectConfig(["h100-sxm5-80gb", "rtx-3080-10gb"]);
  assert.match(text, /^gpus = \["h100-sxm5-80gb", "rtx-3080-10gb"\]$/m);
  assert.match(text, /honoured only when the workspace is trusted/);
  // everything else is commented out: the file sets nothing but the GPUs
  const active = text.split("\n").filter((l) => l.trim() && !l.trim().startsWith("#"));
  assert.deepEqual(active, ['gpus = ["h100-sxm5-80gb", "rtx-3080-10gb"]']);
});

test("an existing file keeps everything but its gpus line", () => {
  const before = '# ours\ngpus = ["h100"]\n\n[rules]\n"occupancy/low" = "off"\n';
  assert.equal(withGpus(before, ["a100-sxm4-80gb", "l40s"]), '# ours\ngpus = ["a100-sxm4-80gb", "l40s"]\n\n[rules]\n"occupancy/low" = "off"\n');
});

test("a gpus array over several lines is replaced whole", () => {
  const before = 'gpus = [\n  "h100",  # the cluster\n  "t4",\n]\nenable = true\n';
  assert.equal(withGpus(before, ["b200"]), 'gpus = ["b200"]\nenable = true\n');
});

test("no gpus line: inserted before the first table, or appended", () => {
  assert.equal(withGpus('enable = true\n[rules]\nx = "off"\n', ["l4"]), 'enable = true\ngpus = ["l4"]\n\n[rules]\nx = "off"\n');
  assert.equal(withGpus("enable = true", ["l4"]), 'enable = true\ngpus = ["l4"]\n');
  // a `gpus` key inside a table is not the top-level one
  assert.equal(withGpus('[profile]\ngpus = ["x"]\n', ["l4"]), 'gpus = ["l4"]\n\n[profile]\ngpus = ["x"]\n');
});

test("GPU ids are quoted as TOML strings", () => {
  assert.equal(tomlStringArray(['we"ird']), '["we\\"ird"]');
});
