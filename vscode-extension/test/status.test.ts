import assert from "node:assert/strict";
import { test } from "node:test";
import { gpuLabel, parseStatus, statusView } from "../src/status";

test("status notifications parse with ids or objects", () => {
  assert.deepEqual(parseStatus({ gpus: ["h100"], llm: "ready" }), { gpus: [{ id: "h100" }], llm: "ready", llmDetail: undefined, trusted: undefined });
  assert.equal(parseStatus({ gpus: [], llm: "off", llmReason: "disabled", trusted: false }).llmDetail, "disabled");
  assert.deepEqual(parseStatus({ gpus: [{ id: "a100", name: "NVIDIA A100" }], llm: { state: "failing", detail: "timeout" } }), {
    gpus: [{ id: "a100", name: "NVIDIA A100" }],
    llm: "failing",
    llmDetail: "timeout",
    trusted: undefined,
  });
  assert.equal(parseStatus({ llm: "bogus" }).llm, "off");
  assert.deepEqual(parseStatus(null).gpus, []);
});

test("one GPU shows its name, several their ids", () => {
  assert.equal(gpuLabel([{ id: "h100", name: "NVIDIA H100 SXM5 80GB" }]), "NVIDIA H100 SXM5 80GB");
  assert.equal(gpuLabel([{ id: "h100" }, { id: "rtx-3080" }]), "h100, rtx-3080");
  assert.equal(gpuLabel([]), "no GPU");
});

test("the item shows GPU and LLM state, and clicking picks GPUs", () => {
  const off = statusView("running", { gpus: [{ id: "h100", name: "H100" }], llm: "off" });
  assert.equal(off.text, "$(dashboard) H100");
  assert.equal(off.command, "perflsp.chooseGpus");
  assert.equal(off.severity, undefined);
  const busy = statusView("running", { gpus: [{ id: "h100" }], llm: "busy" });
  assert.equal(busy.text, "$(dashboard) h100 $(sync~spin) LLM busy");
  const failing = statusView("running", { gpus: [{ id: "h100" }], llm: "failing", llmDetail: "connection refused" });
  assert.equal(failing.severity, "warning");
  assert.match(failing.tooltip, /connection refused/);
});

test("a failed start shows the problem and opens the log", () => {
  const v = statusView("failed", undefined, "perflsp is not installed in python3");
  assert.equal(v.severity, "error");
  assert.equal(v.tooltip, "perflsp is not installed in python3");
  assert.equal(v.command, "perflsp.showOutput");
  assert.equal(statusView("starting", undefined).text, "$(loading~spin) perflsp");
});

test("the tooltip says whether the workspace is trusted", () => {
  assert.match(statusView("running", { gpus: [{ id: "h100" }], llm: "off", trusted: false }).tooltip, /Workspace: restricted/);
  assert.match(statusView("running", { gpus: [{ id: "h100" }], llm: "off", trusted: true }).tooltip, /Workspace: trusted/);
  assert.doesNotMatch(statusView("running", { gpus: [{ id: "h100" }], llm: "off" }).tooltip, /Workspace:/);
});
