// Quick-pick items for the server's GPU database (`perflsp.listGpus`). No `vscode` import.

export interface GpuInfo {
  id: string;
  name: string;
  vendor?: string;
  architecture?: string;
  memoryBandwidthGbs?: number;
  memoryGb?: number;
  peaksTflops: Record<string, number>;
  aliases: string[];
}

export interface GpuItem {
  label: string;
  description: string;
  detail: string;
  picked: boolean;
  id: string;
  kind?: "separator";
}

function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

/** Accepts a list, or `{gpus: [...]}`, of GPUs in camelCase or snake_case. */
export function parseGpuList(raw: unknown): GpuInfo[] {
  const list = Array.isArray(raw) ? raw : Array.isArray((raw as { gpus?: unknown })?.gpus) ? (raw as { gpus: unknown[] }).gpus : [];
  const out: GpuInfo[] = [];
  for (const entry of list) {
    const g = entry as Record<string, unknown>;
    if (!g || typeof g.id !== "string") {
      continue;
    }
    const peaks: Record<string, number> = {};
    const rawPeaks = (g.peaksTflops ?? g.peaks_tflops ?? g.peaks) as Record<string, unknown> | undefined;
    for (const [precision, value] of Object.entries(rawPeaks ?? {})) {
      const tflops = num(value) ?? num((value as { tflops?: unknown })?.tflops);
      if (tflops !== undefined) {
        peaks[precision] = tflops;
      }
    }
    out.push({
      id: g.id,
      name: typeof g.name === "string" ? g.name : g.id,
      vendor: typeof g.vendor === "string" ? g.vendor : undefined,
      architecture: typeof g.architecture === "string" ? g.architecture : undefined,
      memoryBandwidthGbs: num(g.memoryBandwidthGbs ?? g.memory_bandwidth_gbs),
      memoryGb: num(g.memoryGb ?? g.memory_gb),
      peaksTflops: peaks,
      aliases: Array.isArray(g.aliases) ? g.aliases.filter((a): a is string => typeof a === "string") : [],
    });
  }
  return out;
}

/** Three significant figures at most, no trailing zeros after the point. */
const fmt = (v: number) => (v >= 100 ? v.toFixed(0) : (v >= 10 ? v.toFixed(1) : v.toFixed(2)).replace(/\.?0+$/, ""));

export function specLine(gpu: GpuInfo): string {
  const parts: string[] = [];
  for (const precision of ["fp64", "fp32", "fp16"]) {
    const v = gpu.peaksTflops[precision];
    if (v !== undefined) {
      parts.push(`${precision.toUpperCase()} ${fmt(v)} TFLOP/s`);
    }
  }
  if (gpu.memoryBandwidthGbs !== undefined) {
    parts.push(`${fmt(gpu.memoryBandwidthGbs)} GB/s`);
  }
  if (gpu.memoryGb !== undefined) {
    parts.push(`${fmt(gpu.memoryGb)} GB`);
  }
  return parts.join(" · ");
}

/** Items grouped by vendor (a separator before each), the current selection picked. */
export function gpuItems(gpus: GpuInfo[], selected: string[]): GpuItem[] {
  const chosen = new Set(selected.map((s) => s.toLowerCase()));
  const isChosen = (g: GpuInfo) => chosen.has(g.id.toLowerCase()) || g.aliases.some((a) => chosen.has(a.toLowerCase()));
  const byVendor = new Map<string, GpuInfo[]>();
  for (const g of gpus) {
    const vendor = g.vendor ?? "Other";
    byVendor.set(vendor, [...(byVendor.get(vendor) ?? []), g]);
  }
  const items: GpuItem[] = [];
  for (const [vendor, list] of byVendor) {
    items.push({ label: vendor, description: "", detail: "", picked: false, id: "", kind: "separator" });
    for (const g of list) {
      items.push({
        label: g.name,
        description: [g.id, g.architecture].filter(Boolean).join(" · "),
        detail: specLine(g),
        picked: isChosen(g),
        id: g.id,
      });
    }
  }
  return items;
}
