// The roofline view's data: the server's `perflsp.rooflineData` answer normalised into one view
// per GPU, and the chart geometry (roofs as polylines, axis ranges). No DOM, no `vscode`:
// shared by the webview script and the unit tests.

export type PointKind = "predicted" | "measured";

export interface Roof {
  precision: string;
  peakGflops: number; // GFLOP/s (GOP/s for integer)
  ridge: number; // FLOP per DRAM byte where the slope meets the flat roof
}

export interface KernelPoint {
  kernel: string;
  uri: string;
  line: number; // 0-based
  character: number;
  kind: PointKind;
  precision: string; // the precision whose intensity places the point
  intensity: number; // FLOP/byte
  gflops: number; // attained (measured) or attainable (predicted) GFLOP/s
  verdict: string; // "compute" | "bandwidth" | "uncertain"
  detail: string[]; // extra lines for the tooltip
  stale?: boolean; // a measurement of an older text of the kernel
  /** the assumption the verdict rests on (server's `decidingAssumption`); null: sizes from the source */
  assumption?: string | null;
}

export interface GpuView {
  id: string;
  name: string;
  bandwidthGbs: number;
  roofs: Roof[];
  points: KernelPoint[];
}

export interface XY {
  x: number;
  y: number;
}

type Json = Record<string, unknown>;

function get(obj: unknown, ...names: string[]): unknown {
  if (!obj || typeof obj !== "object") {
    return undefined;
  }
  for (const name of names) {
    const value = (obj as Json)[name];
    if (value !== undefined && value !== null) {
      return value;
    }
  }
  return undefined;
}

function num(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

function str(value: unknown, fallback = ""): string {
  return typeof value === "string" ? value : fallback;
}

/** Roof of one precision; peaks come as TFLOP/s or GFLOP/s, ridges may be omitted. */
function roofsOf(gpu: unknown, bandwidthGbs: number): Roof[] {
  const roofs: Roof[] = [];
  const list = get(gpu, "roofs");
  if (Array.isArray(list)) {
    for (const r of list) {
      const gflops = num(get(r, "peakGflops", "peak_gflops")) ?? (num(get(r, "peakTflops", "peak_tflops")) ?? NaN) * 1000;
      const precision = str(get(r, "precision"));
      if (precision && Number.isFinite(gflops) && gflops > 0) {
        roofs.push({ precision, peakGflops: gflops, ridge: num(get(r, "ridge")) ?? gflops / bandwidthGbs });
      }
    }
    return roofs;
  }
  const peaks = get(gpu, "peaksTflops", "peaks_tflops", "peaks") as Json | undefined;
  const ridges = (get(gpu, "ridges") as Json | undefined) ?? {};
  if (peaks && typeof peaks === "object") {
    for (const [precision, value] of Object.entries(peaks)) {
      const tflops = num(value) ?? num(get(value, "tflops", "value"));
      if (tflops && tflops > 0) {
        roofs.push({ precision, peakGflops: tflops * 1000, ridge: num(ridges[precision]) ?? (tflops * 1000) / bandwidthGbs });
      }
    }
  }
  return roofs;
}

function pointOf(kernel: unknown, result: unknown, kind: PointKind, where: unknown): KernelPoint | undefined {
  const intensity = num(get(where, "intensity", "ai", "x"));
  const gflops = num(get(where, "gflops", "performanceGflops", "performance_gflops", "y"));
  if (intensity === undefined || gflops === undefined || intensity <= 0 || gflops <= 0) {
    return undefined;
  }
  const range = get(kernel, "range", "selectionRange");
  const start = get(range, "start") ?? get(kernel, "position");
  const detail: string[] = [];
  const summary = get(where, "summary", "evidence") ?? get(result, "summary");
  if (typeof summary === "string" && summary) {
    detail.push(summary);
  }
  const stale = get(where, "stale") === true;
  if (stale) {
    detail.push("Stale: the kernel changed since it was measured");
  }
  return {
    stale,
    kernel: str(get(kernel, "name", "kernel"), "kernel"),
    uri: str(get(kernel, "uri")),
    line: num(get(start, "line")) ?? 0,
    character: num(get(start, "character")) ?? 0,
    kind,
    precision: str(get(where, "precision") ?? get(result, "precision"), "fp32"),
    intensity,
    gflops,
    verdict: str(get(where, "verdict") ?? get(result, "verdict"), "uncertain"),
    detail,
  };
}

/**
 * The server's per-GPU estimate `{verdict, deciding, intensity: {precision: FLOP/B}, ridge, confidence,
 * measured}`: the predicted point sits at the deciding precision's intensity, at the height its roof
 * allows there (attainable performance, min(peak, bandwidth × intensity)).
 */
function pointsOfEstimate(kernel: unknown, estimate: unknown, gpuId: string, bandwidthGbs: number, roofs: Roof[]): KernelPoint[] {
  if (!estimate) {
    return [];
  }
  const intensity = (get(estimate, "intensity") ?? {}) as Json;
  const ridge = (get(estimate, "ridge") ?? {}) as Json;
  // the precision whose roof judges the point: the one the headline quotes (`judgedBy`), else the deciding one
  let precision = str(get(estimate, "judgedBy", "deciding"));
  if (!precision) {
    // nearest to its ridge, as the server's headline does
    let best = -1;
    for (const [p, v] of Object.entries(intensity)) {
      const r = num(ridge[p]);
      const ai = num(v);
      if (r && ai !== undefined && ai / r > best) {
        best = ai / r;
        precision = p;
      }
    }
  }
  const ai = num(intensity[precision]);
  const roof = roofs.find((r) => r.precision === precision);
  const points: KernelPoint[] = [];
  const detail: string[] = [];
  const confidence = num(get(estimate, "confidence"));
  if (confidence !== undefined) {
    detail.push(`Confidence: ${Math.round(confidence * 100)}%`);
  }
  const occupancy = num(get(estimate, "occupancy"));
  if (occupancy !== undefined) {
    const limiter = str(get(estimate, "limiter"));
    detail.push(`Occupancy: ${Math.round(occupancy * 100)}%${limiter ? ` (limited by ${limiter})` : ""}`);
  }
  if (ai !== undefined && ai > 0) {
    const ceiling = roof ? roof.peakGflops : Infinity;
    const predicted = pointOf(kernel, estimate, "predicted", { precision, intensity: ai, gflops: Math.min(ceiling, bandwidthGbs * ai) });
    if (predicted) {
      predicted.detail = detail;
      points.push(predicted);
    }
  }
  const measured = get(estimate, "measured");
  if (measured) {
    const point = pointOf(kernel, estimate, "measured", measured);
    if (point) {
      points.push(point);
    }
  }
  const assumption = get(estimate, "decidingAssumption", "deciding_assumption");
  for (const point of points) {
    if (point.kind === "predicted") {
      // a measurement rests on no assumption; absent from an older server: undefined (not said)
      point.assumption = typeof assumption === "string" ? assumption : Array.isArray(get(kernel, "assumptions")) ? null : undefined;
    }
  }
  void gpuId;
  return points;
}

/** The precisions a verdict is decided on (the server's ROOFLINE_PRECISIONS): their roofs are drawn;
 * tensor-core roofs only when a kernel's point uses one. */
export const VERDICT_PRECISIONS = ["fp64", "fp32", "fp16", "int32"];

/** Normalises the server's `perflsp.rooflineData` answer (camelCase or snake_case keys). */
export function normalise(data: unknown): GpuView[] {
  const gpus = get(data, "gpus");
  const kernels = get(data, "kernels");
  if (!Array.isArray(gpus)) {
    return [];
  }
  return gpus.map((gpu): GpuView => {
    const id = str(get(gpu, "id"));
    const bandwidthGbs = num(get(gpu, "bandwidthGbs", "memoryBandwidthGbs", "memory_bandwidth_gbs", "bandwidth_gbs")) ?? 1;
    const points: KernelPoint[] = [];
    for (const kernel of Array.isArray(kernels) ? kernels : []) {
      const estimates = get(kernel, "estimates");
      if (Array.isArray(estimates)) {
        const estimate: unknown = (estimates as unknown[]).find((e) => get(e, "gpu") === id);
        points.push(...pointsOfEstimate(kernel, estimate, id, bandwidthGbs, roofsOf(gpu, bandwidthGbs)));
        continue;
      }
      const result = get(get(kernel, "results", "perGpu", "per_gpu", "gpus"), id);
      if (!result) {
        continue;
      }
      const predicted = pointOf(kernel, result, "predicted", get(result, "predicted", "position") ?? result);
      if (predicted) {
        points.push(predicted);
      }
      const measured = get(result, "measured");
      if (measured) {
        const point = pointOf(kernel, result, "measured", measured);
        if (point) {
          points.push(point);
        }
      }
    }
    const used = new Set(points.map((p) => p.precision));
    const roofs = roofsOf(gpu, bandwidthGbs).filter((r) => VERDICT_PRECISIONS.includes(r.precision) || used.has(r.precision));
    return { id, name: str(get(gpu, "name"), id), bandwidthGbs, roofs, points };
  });
}

/** Order of roofs in the legend: the usual precisions first, then the rest alphabetically. */
const PRECISION_ORDER = ["fp64", "fp32", "fp16", "bf16", "int32"];

export function sortRoofs(roofs: Roof[]): Roof[] {
  const rank = (p: string) => {
    const i = PRECISION_ORDER.indexOf(p);
    return i < 0 ? PRECISION_ORDER.length : i;
  };
  return [...roofs].sort((a, b) => rank(a.precision) - rank(b.precision) || a.precision.localeCompare(b.precision));
}

export interface Axes {
  xMin: number;
  xMax: number;
  yMin: number;
  yMax: number;
}

const decadeBelow = (v: number) => Math.pow(10, Math.floor(Math.log10(v)));
const decadeAbove = (v: number) => Math.pow(10, Math.ceil(Math.log10(v)));

/** Whole decades around every ridge and point, so nothing sits on the frame. */
export function axesFor(view: GpuView): Axes {
  const xs = [...view.roofs.map((r) => r.ridge), ...view.points.map((p) => p.intensity)].filter((v) => v > 0);
  const ys = [...view.roofs.map((r) => r.peakGflops), ...view.points.map((p) => p.gflops)].filter((v) => v > 0);
  const xMin = decadeBelow(Math.min(0.01, ...xs) / 2);
  const xMax = decadeAbove(Math.max(100, ...xs) * 2);
  const yMax = decadeAbove(Math.max(...ys, 1) * 1.5);
  // the slope at the left edge, or the lowest point, whichever is lower
  const yMin = decadeBelow(Math.min(view.bandwidthGbs * xMin, ...ys.map((y) => y / 2)));
  return { xMin, xMax, yMin, yMax };
}

/** The roof of one precision as a polyline: the bandwidth slope up to the ridge, then flat. */
export function roofLine(roof: Roof, bandwidthGbs: number, axes: Axes): XY[] {
  const ridge = roof.peakGflops / bandwidthGbs;
  const left = { x: axes.xMin, y: bandwidthGbs * axes.xMin };
  if (ridge <= axes.xMin) {
    return [{ x: axes.xMin, y: roof.peakGflops }, { x: axes.xMax, y: roof.peakGflops }];
  }
  return [left, { x: ridge, y: roof.peakGflops }, { x: axes.xMax, y: roof.peakGflops }];
}

/** Tooltip lines for a point: its numbers against its own precision's roof, and what decides it. */
export function describePoint(p: KernelPoint, view: GpuView): string[] {
  const roof = view.roofs.find((r) => r.precision === p.precision);
  const unit = intensityUnit(p.precision);
  const name = precisionName(p.precision);
  const lines = [
    `${p.kind === "measured" ? "Measured" : "Predicted"} on ${view.name}`,
    `Arithmetic intensity: ${formatNumber(p.intensity)} ${unit} (${name})`,
    `${p.kind === "measured" ? "Attained" : "Attainable"}: ${formatNumber(p.gflops)} ${throughputUnit(p.precision)}`,
    `Verdict: ${p.verdict}-bound`.replace("uncertain-bound", "uncertain"),
  ];
  if (roof) {
    const side = p.intensity >= roof.ridge ? "≥" : "<";
    lines.push(`Judged against the ${name} roof: ${formatNumber(p.intensity)} ${side} ridge ${formatNumber(roof.ridge)} ${unit}`);
  }
  if (p.kind === "measured") {
    lines.push("Decided by the measurement (Nsight Compute), not by an assumption");
  } else if (p.assumption) {
    lines.push(`Decided by the assumption: ${p.assumption}`);
  } else if (p.assumption === null) {
    lines.push("Decided by no assumption: the sizes come from the source");
  }
  return [...lines, ...p.detail];
}

export function formatNumber(v: number): string {
  if (v === 0) {
    return "0";
  }
  const abs = Math.abs(v);
  if (abs >= 1000) {
    return Math.round(v).toLocaleString("en-US");
  }
  if (abs >= 10) {
    return v.toFixed(1).replace(/\.0$/, "");
  }
  if (abs >= 0.01) {
    return v.toFixed(2).replace(/\.?0+$/, "");
  }
  return v.toExponential(1);
}

/** "FP32", "INT32", "FP16 tensor" — a precision as the view names it. */
export function precisionName(precision: string): string {
  return precision.replace(/_tensor$/, " tensor").replace(/^(fp|int|bf|tf)(\d+)/i, (m) => m.toUpperCase());
}

/** Work per DRAM byte in a precision: FLOP/B for floating point, op/B for integer instructions. */
export function intensityUnit(precision: string): string {
  return precision.startsWith("int") ? "op/B" : "FLOP/B";
}

export function throughputUnit(precision: string): string {
  return precision.startsWith("int") ? "GOP/s" : "GFLOP/s";
}

/** The roofs that judge at least one point of the view (drawn bold), with how many points each. */
export function decidingRoofs(view: GpuView): Map<string, number> {
  const out = new Map<string, number>();
  for (const p of view.points) {
    out.set(p.precision, (out.get(p.precision) ?? 0) + 1);
  }
  return out;
}

/** The precisions of the view's points, in legend order. */
function pointPrecisions(view: GpuView): string[] {
  const used = [...decidingRoofs(view).keys()];
  return sortRoofs(used.map((precision) => ({ precision, peakGflops: 0, ridge: 0 }))).map((r) => r.precision);
}

/** Axis titles that say each point is in its own precision's units. */
export function axisTitles(view: GpuView): { x: string; y: string } {
  const used = pointPrecisions(view);
  const units = (used.length ? used : ["fp32"]).map((p) => `${precisionName(p)} ${intensityUnit(p)}`);
  const throughput = [...new Set((used.length ? used : ["fp32"]).map(throughputUnit))];
  return {
    x: `Arithmetic intensity per DRAM byte, each kernel in its deciding precision (${units.join(" · ")})`,
    y: `Performance (${throughput.join(" or ")}, in the point's precision)`,
  };
}

/** The legend label of a roof: its peak and ridge in its own units, and whether it judges any point. */
export function roofLabel(roof: Roof, view: GpuView): string {
  const judged = decidingRoofs(view).get(roof.precision) ?? 0;
  const peak = `${formatNumber(roof.peakGflops / 1000)} T${throughputUnit(roof.precision).slice(1)}`;
  const ridge = `ridge ${formatNumber(roof.ridge)} ${intensityUnit(roof.precision)}`;
  const judges = judged ? `judges ${judged} point${judged === 1 ? "" : "s"}` : "judges none";
  return `${precisionName(roof.precision)} roof · ${peak}, ${ridge} · ${judges}`;
}

/** The legend label of a group of points: precision (with unit), kind, verdict. */
export function pointGroupLabel(precision: string, kind: PointKind, verdict: string): string {
  const v = verdict === "uncertain" ? "uncertain" : `${verdict}-bound`;
  return `${precisionName(precision)} (${intensityUnit(precision)}) · ${kind} · ${v}`;
}
