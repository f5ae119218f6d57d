import assert from "node:assert/strict";
import { test } from "node:test";
import {
  axesFor,
  axisTitles,
  decidingRoofs,
  describePoint,
  formatNumber,
  intensityUnit,
  normalise,
  pointGroupLabel,
  precisionName,
  roofLabel,
  roofLine,
  sortRoofs,
} from "../src/roofline/model";

const data = {
  gpus: [{ id: "h100", name: "NVIDIA H100", memoryBandwidthGbs: 3350, peaksTflops: { fp32: 67, fp64: 33.5 }, ridges: { fp32: 20, fp64: 10 } }],
  kernels: [
    {
      name: "saxpy",
      uri: "file:///ws/saxpy.cu",
      range: { start: { line: 11, character: 0 }, end: { line: 16, character: 1 } },
      results: { h100: { verdict: "bandwidth", predicted: { precision: "fp32", intensity: 0.1667, gflops: 558 }, measured: { precision: "fp32", intensity: 0.15, gflops: 480 } } },
    },
    { name: "sgemm", uri: "file:///ws/sgemm.cu", range: { start: { line: 3, character: 0 } }, results: { h100: { verdict: "compute", predicted: { precision: "fp32", intensity: 40, gflops: 67000 } } } },
    { name: "other-gpu-only", uri: "file:///ws/x.cu", results: { a100: { verdict: "compute", predicted: { intensity: 1, gflops: 1 } } } },
  ],
};

test("one predicted point per kernel on the GPU, measured ones told apart", () => {
  const [view] = normalise(data);
  assert.equal(view.id, "h100");
  assert.deepEqual(view.points.map((p) => `${p.kernel}:${p.kind}`), ["saxpy:predicted", "saxpy:measured", "sgemm:predicted"]);
  assert.deepEqual([view.points[0].line, view.points[0].character], [11, 0]);
  assert.deepEqual(sortRoofs(view.roofs).map((r) => [r.precision, r.peakGflops, r.ridge]), [["fp64", 33500, 10], ["fp32", 67000, 20]]);
});

test("snake_case answers and missing ridges normalise too", () => {
  const [view] = normalise({ gpus: [{ id: "g", memory_bandwidth_gbs: 1000, peaks_tflops: { fp32: 10 } }], kernels: [] });
  assert.equal(view.roofs[0].ridge, 10);
  assert.deepEqual(normalise({}), []);
});

test("the axes span whole decades around ridges and points", () => {
  const [view] = normalise(data);
  const axes = axesFor(view);
  for (const v of [axes.xMin, axes.xMax, axes.yMin, axes.yMax]) {
    assert.equal(Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9, true, `${v} is a decade`);
  }
  assert.ok(axes.xMin <= 0.01 && axes.xMax >= 100);
  assert.ok(axes.yMax > 67000 && axes.yMin <= 3350 * axes.xMin);
});

test("a roof rises with the bandwidth up to its ridge, then stays flat", () => {
  const [view] = normalise(data);
  const axes = axesFor(view);
  const fp32 = view.roofs.find((r) => r.precision === "fp32")!;
  const line = roofLine(fp32, view.bandwidthGbs, axes);
  assert.equal(line.length, 3);
  assert.ok(Math.abs(line[0].y - 3350 * axes.xMin) < 1e-9);
  assert.ok(Math.abs(line[1].x - 67000 / 3350) < 1e-9);
  assert.equal(line[1].y, 67000);
  assert.deepEqual(line[2], { x: axes.xMax, y: 67000 });
});

test("tooltips give the point's numbers", () => {
  const [view] = normalise(data);
  const lines = describePoint(view.points[1], view);
  assert.equal(lines[0], "Measured on NVIDIA H100");
  assert.match(lines[1], /0\.15 FLOP\/B \(FP32\)/);
  assert.match(lines[2], /Attained: 480 GFLOP\/s/);
  assert.equal(lines[3], "Verdict: bandwidth-bound");
  assert.equal(formatNumber(67000), "67,000");
  assert.equal(formatNumber(0.001234), "1.2e-3");
});

test("the server's estimates become points at the deciding precision, on the roof's ceiling or slope", () => {
  const server = {
    gpus: [{ id: "h100", name: "H100 SXM5 80GB", bandwidthGbs: 3350, ridges: { fp32: 20, int32: 10, fp16_tensor: 295 }, peaksTflops: { fp32: 67, int32: 33.5, fp16_tensor: 989 } }],
    kernels: [
      { name: "saxpy", uri: "file:///ws/saxpy.cu", range: { start: { line: 11, character: 41 }, end: { line: 11, character: 46 } },
        estimates: [{ gpu: "h100", verdict: "bandwidth", label: "bandwidth-bound", deciding: "int32", intensity: { fp32: 0.17, int32: 1.0 }, ridge: { fp32: 20, int32: 10 }, confidence: 0.83, occupancy: 1, limiter: "warps", measured: null }] },
      { name: "sgemm", uri: "file:///ws/sgemm.cu", range: { start: { line: 3, character: 0 }, end: { line: 3, character: 5 } },
        estimates: [{ gpu: "h100", verdict: "compute", deciding: null, intensity: { fp32: 40, int32: 2 }, ridge: { fp32: 20, int32: 10 }, confidence: 0.6, measured: { intensity: 35, gflops: 41000 } }] },
    ],
  };
  const [view] = normalise(server);
  assert.deepEqual(view.roofs.map((r) => r.precision).sort(), ["fp32", "int32"], "tensor roofs only when used");
  const [saxpy, sgemm, measured] = view.points;
  assert.deepEqual([saxpy.precision, saxpy.intensity, saxpy.gflops, saxpy.verdict], ["int32", 1.0, 3350, "bandwidth"]);
  assert.deepEqual([saxpy.line, saxpy.character], [11, 41]);
  assert.ok(saxpy.detail.includes("Confidence: 83%") && saxpy.detail.includes("Occupancy: 100% (limited by warps)"));
  // no deciding precision: the one nearest its ridge (fp32: 40/20 beats int32: 2/10), capped by its peak
  assert.deepEqual([sgemm.precision, sgemm.gflops, sgemm.kind], ["fp32", 67000, "predicted"]);
  assert.deepEqual([measured.kind, measured.intensity, measured.gflops, measured.kernel], ["measured", 35, 41000, "sgemm"]);
});

test("a measured point from the server's evidence; a stale one says so", () => {
  const data = {
    gpus: [{ id: "rtx-3080-10gb", name: "GeForce RTX 3080 (10GB)", bandwidthGbs: 760, peaksTflops: { fp32: 29.8, int32: 14.9 }, ridges: { fp32: 39.2, int32: 19.6 } }],
    kernels: [
      {
        name: "ns::saxpy",
        uri: "file:///w/k.cu",
        range: { start: { line: 2, character: 16 }, end: { line: 2, character: 21 } },
        estimates: [
          {
            gpu: "rtx-3080-10gb",
            verdict: "bandwidth",
            deciding: null,
            intensity: { fp32: 0.2, int32: 1 },
            ridge: { fp32: 39.2, int32: 19.6 },
            measured: { precision: "int32", intensity: 0.333, gflops: 202, verdict: "bandwidth", stale: true, summary: "measured on NVIDIA GeForce RTX 3080 (stale: the kernel changed since)" },
          },
        ],
      },
    ],
  };
  const [view] = normalise(data);
  const measured = view.points.find((p) => p.kind === "measured");
  assert.ok(measured);
  assert.deepEqual([measured.precision, measured.intensity, measured.gflops, measured.verdict, measured.stale], ["int32", 0.333, 202, "bandwidth", true]);
  assert.ok(measured.detail.some((line) => line.startsWith("Stale")));
  assert.ok(describePoint(measured, view).includes("Decided by the measurement (Nsight Compute), not by an assumption"));
});

const mixed = {
  gpus: [{ id: "h100", name: "H100 SXM5 80GB", bandwidthGbs: 3350, ridges: { fp64: 10, fp32: 20, int32: 10, fp16: 40 }, peaksTflops: { fp64: 33.5, fp32: 67, int32: 33.5, fp16: 134 } }],
  kernels: [
    { name: "saxpy", uri: "file:///ws/saxpy.cu", range: { start: { line: 11, character: 41 } }, assumptions: [],
      estimates: [{ gpu: "h100", verdict: "bandwidth", deciding: "int32", intensity: { fp32: 0.17, int32: 1.0 }, ridge: { fp32: 20, int32: 10 }, decidingAssumption: null, measured: null }] },
    { name: "gemm", uri: "file:///ws/gemm.cu", range: { start: { line: 3, character: 0 } }, assumptions: ["problem size unknown: assumed large, data beyond L2"],
      estimates: [{ gpu: "h100", verdict: "compute", deciding: "fp32", intensity: { fp32: 40, int32: 2 }, ridge: { fp32: 20, int32: 10 }, decidingAssumption: "problem size unknown: assumed large, data beyond L2", measured: null }] },
  ],
};

test("each point is judged against its own precision's roof, in that precision's units", () => {
  const [view] = normalise(mixed);
  const [saxpy, gemm] = view.points;
  const saxpyLines = describePoint(saxpy, view);
  assert.equal(saxpyLines[1], "Arithmetic intensity: 1 op/B (INT32)");
  assert.equal(saxpyLines[2], "Attainable: 3,350 GOP/s");
  assert.ok(saxpyLines.includes("Judged against the INT32 roof: 1 < ridge 10 op/B"), saxpyLines.join("\n"));
  const gemmLines = describePoint(gemm, view);
  assert.equal(gemmLines[1], "Arithmetic intensity: 40 FLOP/B (FP32)");
  assert.ok(gemmLines.includes("Judged against the FP32 roof: 40 ≥ ridge 20 FLOP/B"), gemmLines.join("\n"));
});

test("a point's tooltip names the assumption that decides it, or says there is none", () => {
  const [view] = normalise(mixed);
  const [saxpy, gemm] = view.points;
  assert.equal(gemm.assumption, "problem size unknown: assumed large, data beyond L2");
  assert.ok(describePoint(gemm, view).includes("Decided by the assumption: problem size unknown: assumed large, data beyond L2"));
  assert.equal(saxpy.assumption, null);
  assert.ok(describePoint(saxpy, view).includes("Decided by no assumption: the sizes come from the source"));
  // an older server that sends neither: the tooltip says nothing about assumptions
  const [old] = normalise({ ...mixed, kernels: [{ ...mixed.kernels[0], assumptions: undefined, estimates: [{ ...mixed.kernels[0].estimates[0], decidingAssumption: undefined }] }] });
  assert.ok(!describePoint(old.points[0], old).some((l) => l.startsWith("Decided by")));
});

test("axis titles and legend name the precisions; the deciding roofs are told apart", () => {
  const [view] = normalise(mixed);
  const titles = axisTitles(view);
  assert.equal(titles.x, "Arithmetic intensity per DRAM byte, each kernel in its deciding precision (FP32 FLOP/B · INT32 op/B)");
  assert.match(titles.y, /GFLOP\/s or GOP\/s/);
  assert.deepEqual([...decidingRoofs(view).entries()].sort(), [["fp32", 1], ["int32", 1]]);
  const labels = Object.fromEntries(view.roofs.map((r) => [r.precision, roofLabel(r, view)]));
  assert.equal(labels.int32, "INT32 roof · 33.5 TOP/s, ridge 10 op/B · judges 1 point");
  assert.equal(labels.fp32, "FP32 roof · 67 TFLOP/s, ridge 20 FLOP/B · judges 1 point");
  assert.equal(labels.fp64, "FP64 roof · 33.5 TFLOP/s, ridge 10 FLOP/B · judges none");
  assert.equal(pointGroupLabel("int32", "predicted", "bandwidth"), "INT32 (op/B) · predicted · bandwidth-bound");
  assert.equal(precisionName("fp16_tensor"), "FP16 tensor");
  assert.equal(intensityUnit("fp64"), "FLOP/B");
});

test("the point sits at the precision the server judges it by (judgedBy), over the deciding one", () => {
  const [view] = normalise({
    ...mixed,
    kernels: [{ ...mixed.kernels[0], estimates: [{ ...mixed.kernels[0].estimates[0], deciding: null, judgedBy: "fp32" }] }],
  });
  const [saxpy] = view.points;
  assert.deepEqual([saxpy.precision, saxpy.intensity], ["fp32", 0.17]);
  assert.ok(describePoint(saxpy, view).includes("Judged against the FP32 roof: 0.17 < ridge 20 FLOP/B"));
});
