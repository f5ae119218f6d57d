import assert from "node:assert/strict";
import { test } from "node:test";
import { gpuItems, parseGpuList, specLine } from "../src/gpuPicker";

const raw = {
  gpus: [
    { id: "h100", name: "NVIDIA H100 SXM5 80GB", vendor: "NVIDIA", architecture: "Hopper", memory_bandwidth_gbs: 3350, memory_gb: 80, aliases: ["h100-sxm"], peaks_tflops: { fp64: 33.5, fp32: 66.9, fp16: 133.8 } },
    { id: "mi250x", name: "AMD Instinct MI250X", vendor: "AMD", memoryBandwidthGbs: 3276.8, peaksTflops: { fp64: 47.9, fp32: { tflops: 47.9 } } },
    { name: "no id" },
  ],
};

test("the database list parses in either key style and skips entries without an id", () => {
  const gpus = parseGpuList(raw);
  assert.equal(gpus.length, 2);
  assert.equal(gpus[0].memoryBandwidthGbs, 3350);
  assert.deepEqual(gpus[1].peaksTflops, { fp64: 47.9, fp32: 47.9 });
  assert.deepEqual(parseGpuList(raw.gpus).map((g) => g.id), ["h100", "mi250x"]);
  assert.deepEqual(parseGpuList("nonsense"), []);
});

test("items carry specs, group by vendor and pick the current GPUs (by id or alias)", () => {
  const gpus = parseGpuList(raw);
  assert.equal(specLine(gpus[0]), "FP64 33.5 TFLOP/s · FP32 66.9 TFLOP/s · FP16 134 TFLOP/s · 3350 GB/s · 80 GB");
  const items = gpuItems(gpus, ["H100-SXM"]);
  assert.deepEqual(items.map((i) => i.kind ?? i.id), ["separator", "h100", "separator", "mi250x"]);
  assert.equal(items[1].picked, true);
  assert.equal(items[3].picked, false);
  assert.equal(items[1].description, "h100 · Hopper");
});
