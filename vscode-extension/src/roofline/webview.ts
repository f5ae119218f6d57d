// Runs inside the roofline webview (a browser context). Draws every kernel on the selected GPU's
// roofline with Chart.js (bundled; no remote resources), in the editor theme's colours.
import {
  Chart,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  LogarithmicScale,
  PointElement,
  ScatterController,
  Tooltip,
  type ChartDataset,
  type TooltipItem,
} from "chart.js";
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
  throughputUnit,
  type GpuView,
  type KernelPoint,
} from "./model";

Chart.register(ScatterController, LineController, LineElement, PointElement, LinearScale, LogarithmicScale, Tooltip, Legend);

interface VsCodeApi {
  postMessage(message: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
let views: GpuView[] = [];
let selected = (vscode.getState() as { gpu?: string } | undefined)?.gpu ?? "";
let chart: Chart | undefined;
let highlighted = ""; // the roof of the point under the mouse

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

function themeColor(name: string, fallback: string): string {
  const value = getComputedStyle(document.body).getPropertyValue(`--vscode-${name}`).trim();
  return value || fallback;
}

function palette() {
  return {
    foreground: themeColor("foreground", "#cccccc"),
    grid: themeColor("charts-lines", "rgba(128,128,128,0.35)"),
    background: themeColor("editor-background", "#1e1e1e"),
    widget: themeColor("editorWidget-background", "#252526"),
    border: themeColor("editorWidget-border", "#454545"),
    font: themeColor("font-family", "sans-serif"),
    roof: {
      fp64: themeColor("charts-purple", "#b180d7"),
      fp32: themeColor("charts-green", "#89d185"),
      fp16: themeColor("charts-orange", "#d18616"),
      bf16: themeColor("charts-yellow", "#cca700"),
      int32: themeColor("charts-blue", "#3794ff"),
      fp16_tensor: themeColor("charts-red", "#f14c4c"),
      bf16_tensor: themeColor("charts-red", "#f14c4c"),
    } as Record<string, string>,
    verdict: {
      compute: themeColor("charts-red", "#f14c4c"),
      bandwidth: themeColor("charts-blue", "#3794ff"),
      uncertain: themeColor("charts-yellow", "#cca700"),
    } as Record<string, string>,
  };
}

type PointData = { x: number; y: number; point: KernelPoint };
type RoofDataset = ChartDataset<"line", { x: number; y: number }[]> & { roof?: string; judges?: number };

/** Verdicts by marker shape (colour is the precision, so a point matches the roof that judges it). */
const VERDICT_STYLE: Record<string, "circle" | "triangle" | "crossRot"> = { bandwidth: "circle", compute: "triangle", uncertain: "crossRot" };

function roofWidth(precision: string, judges: number): number {
  if (precision === highlighted) {
    return 5;
  }
  return judges > 0 ? 3 : 1;
}

function datasets(view: GpuView): ChartDataset<"scatter" | "line", (PointData | { x: number; y: number })[]>[] {
  const colors = palette();
  const axes = axesFor(view);
  const judging = decidingRoofs(view);
  const out: ChartDataset<"scatter" | "line", (PointData | { x: number; y: number })[]>[] = [];
  for (const roof of sortRoofs(view.roofs)) {
    const judges = judging.get(roof.precision) ?? 0;
    const dataset: RoofDataset = {
      type: "line",
      label: roofLabel(roof, view),
      data: roofLine(roof, view.bandwidthGbs, axes),
      borderColor: colors.roof[roof.precision] ?? colors.foreground,
      borderWidth: roofWidth(roof.precision, judges),
      // roofs that judge no point stay in the picture for reference, dashed
      borderDash: judges > 0 ? [] : [6, 4],
      pointRadius: 0,
      pointHitRadius: 0,
      fill: false,
      roof: roof.precision,
      judges,
    };
    out.push(dataset);
  }
  const groups = new Map<string, KernelPoint[]>();
  for (const p of view.points) {
    const key = [p.precision, p.kind, p.verdict].join("|");
    groups.set(key, [...(groups.get(key) ?? []), p]);
  }
  const order = sortRoofs([...judging.keys()].map((precision) => ({ precision, peakGflops: 0, ridge: 0 }))).map((r) => r.precision);
  // by precision (legend order), predicted before measured, then verdict
  const rank = (key: string) => {
    const [precision, kind] = key.split("|");
    return order.indexOf(precision) * 2 + (kind === "measured" ? 1 : 0);
  };
  const keys = [...groups.keys()].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  for (const key of keys) {
    const points = groups.get(key) ?? [];
    const [precision, kind, verdict] = key.split("|");
    const color = colors.roof[precision] ?? colors.foreground;
    out.push({
      type: "scatter",
      label: pointGroupLabel(precision, kind as KernelPoint["kind"], verdict),
      data: points.map((p) => ({ x: p.intensity, y: p.gflops, point: p })),
      // predicted: hollow; measured: filled (and a size larger)
      pointStyle: VERDICT_STYLE[verdict] ?? "circle",
      pointRadius: kind === "predicted" ? 6 : 7,
      pointHoverRadius: 9,
      pointBorderWidth: 2,
      borderColor: color,
      backgroundColor: kind === "predicted" ? "transparent" : color,
    });
  }
  return out;
}

/** Bold the roof of the point under the mouse (the one that judges it). */
function highlight(precision: string): void {
  if (precision === highlighted || !chart) {
    return;
  }
  highlighted = precision;
  document.body.dataset.highlightedRoof = precision;
  for (const d of chart.data.datasets as RoofDataset[]) {
    if (d.roof !== undefined) {
      d.borderWidth = roofWidth(d.roof, d.judges ?? 0);
    }
  }
  chart.update("none");
}

function render(): void {
  const view = views.find((v) => v.id === selected) ?? views[0];
  const empty = $("empty");
  const canvas = $<HTMLCanvasElement>("chart");
  document.body.dataset.pointCount = String(view?.points.length ?? 0);
  document.body.dataset.gpu = view?.id ?? "";
  if (!view) {
    empty.textContent = "No GPU selected or no kernels found in the workspace.";
    empty.hidden = false;
    chart?.destroy();
    chart = undefined;
    renderTable(undefined);
    return;
  }
  empty.hidden = view.points.length > 0;
  empty.textContent = view.points.length ? "" : `No kernels with a roofline estimate for ${view.name} yet.`;
  const colors = palette();
  const axes = axesFor(view);
  const titles = axisTitles(view);
  renderNote(view);
  highlighted = "";
  delete document.body.dataset.highlightedRoof;
  Chart.defaults.color = colors.foreground;
  Chart.defaults.font.family = colors.font;
  Chart.defaults.borderColor = colors.grid;
  chart?.destroy();
  chart = new Chart(canvas, {
    type: "scatter",
    data: { datasets: datasets(view) as ChartDataset<"scatter">[] },
    options: {
      animation: false,
      maintainAspectRatio: false,
      parsing: false,
      scales: {
        x: {
          type: "logarithmic",
          min: axes.xMin,
          max: axes.xMax,
          title: { display: true, text: titles.x },
          grid: { color: colors.grid },
          ticks: { callback: (v) => logTick(Number(v)) },
        },
        y: {
          type: "logarithmic",
          min: axes.yMin,
          max: axes.yMax,
          title: { display: true, text: titles.y },
          grid: { color: colors.grid },
          ticks: { callback: (v) => logTick(Number(v)) },
        },
      },
      plugins: {
        legend: { position: "bottom", labels: { usePointStyle: true, boxWidth: 8, color: colors.foreground } },
        tooltip: {
          backgroundColor: colors.widget,
          borderColor: colors.border,
          borderWidth: 1,
          titleColor: colors.foreground,
          bodyColor: colors.foreground,
          filter: (item) => "point" in (item.raw as object),
          callbacks: {
            title: (items: TooltipItem<"scatter">[]) => items.map((i) => (i.raw as PointData).point.kernel).join(", "),
            label: (item: TooltipItem<"scatter">) => describePoint((item.raw as PointData).point, view),
          },
        },
      },
      onClick: (_event, elements) => {
        const hit = elements.map((e) => (chart?.data.datasets[e.datasetIndex].data[e.index] as PointData | undefined)?.point).find(Boolean);
        if (hit) {
          reveal(hit);
        }
      },
      onHover: (event, elements) => {
        const target = event.native?.target as HTMLElement | undefined;
        const hit = elements.map((e) => (chart?.data.datasets[e.datasetIndex].data[e.index] as PointData | undefined)?.point).find(Boolean);
        if (target) {
          target.style.cursor = hit ? "pointer" : "default";
        }
        highlight(hit?.precision ?? "");
      },
    },
  });
  renderTable(view);
}

function logTick(v: number): string {
  const exponent = Math.log10(v);
  if (Math.abs(exponent - Math.round(exponent)) > 1e-9) {
    return "";
  }
  return v < 1 ? String(Number(v.toPrecision(1))) : formatNumber(v);
}

function reveal(p: KernelPoint): void {
  vscode.postMessage({ type: "reveal", uri: p.uri, line: p.line, character: p.character });
}

function renderTable(view: GpuView | undefined): void {
  const body = $("kernels");
  body.replaceChildren();
  for (const p of view?.points ?? []) {
    const row = document.createElement("tr");
    const name = document.createElement("td");
    const link = document.createElement("a");
    link.href = "#";
    link.textContent = p.kernel;
    link.title = `${p.uri.split("/").pop()}:${p.line + 1}`;
    link.addEventListener("click", (e) => {
      e.preventDefault();
      reveal(p);
    });
    name.append(link);
    row.append(name);
    const decidedBy = p.kind === "measured" ? "measured" : p.assumption ?? (p.assumption === null ? "sizes from the source" : "");
    for (const text of [
      p.stale ? `${p.kind} (stale)` : p.kind,
      `${precisionName(p.precision)} roof`,
      `${formatNumber(p.intensity)} ${intensityUnit(p.precision)}`,
      `${formatNumber(p.gflops)} ${throughputUnit(p.precision)}`,
      p.verdict,
      decidedBy,
    ]) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.append(cell);
    }
    row.className = `verdict-${p.verdict} kind-${p.kind}`;
    body.append(row);
  }
}

/** The sentence under the chart: which roof judges which points, in which units. */
function renderNote(view: GpuView | undefined): void {
  const note = $("judged");
  const judging = view ? decidingRoofs(view) : new Map<string, number>();
  if (!view || judging.size === 0) {
    note.hidden = true;
    return;
  }
  const parts = [...judging.entries()].map(([p, n]) => `${n} against the ${precisionName(p)} roof (${intensityUnit(p)})`);
  note.textContent = `Each kernel is judged against the roof of its own deciding precision: ${parts.join(", ")}. ` +
    "Bold roofs judge at least one point, dashed ones none; hover a point to highlight its roof and see the assumption that decides it.";
  note.hidden = false;
}

function renderGpuPicker(): void {
  const select = $<HTMLSelectElement>("gpu");
  select.replaceChildren(
    ...views.map((v) => {
      const option = document.createElement("option");
      option.value = v.id;
      option.textContent = `${v.name} — ${formatNumber(v.bandwidthGbs)} GB/s`;
      option.selected = v.id === selected;
      return option;
    }),
  );
  select.disabled = views.length < 2;
}

window.addEventListener("message", (event: MessageEvent) => {
  const message = event.data as { type: string; data?: unknown; error?: string };
  if (message.type === "data") {
    views = normalise(message.data);
    if (!views.some((v) => v.id === selected)) {
      selected = views[0]?.id ?? "";
    }
    $("error").hidden = true;
    renderGpuPicker();
    render();
  } else if (message.type === "error") {
    const error = $("error");
    error.textContent = message.error ?? "The server did not answer.";
    error.hidden = false;
  }
});

$<HTMLSelectElement>("gpu").addEventListener("change", (e) => {
  selected = (e.target as HTMLSelectElement).value;
  vscode.setState({ gpu: selected });
  render();
});
$("refresh").addEventListener("click", () => vscode.postMessage({ type: "refresh" }));

// VS Code swaps the body's theme class when the colour theme changes: redraw in the new colours.
new MutationObserver(() => render()).observe(document.body, { attributes: true, attributeFilter: ["class"] });

// Where the n-th kernel point is drawn (CSS pixels in the canvas) and whose it is: lets a test
// hover and click a point as a person would.
type DrawnPoint = { x: number; y: number; kernel: string; uri: string; line: number; precision: string };
(window as unknown as { perflspPointPosition: (n: number) => DrawnPoint | undefined }).perflspPointPosition = (n) => {
  const points = (chart?.data.datasets ?? [])
    .map((d, i) => ({ d, i }))
    .filter(({ d }) => d.type === "scatter")
    .flatMap(({ d, i }) =>
      chart!.getDatasetMeta(i).data.map((e, j) => {
        const p = (d.data[j] as PointData).point;
        return { x: e.x, y: e.y, kernel: p.kernel, uri: p.uri, line: p.line, precision: p.precision };
      }),
    );
  return points[n];
};

// What the chart says in its axis titles and legend, and which roof is highlighted: lets a test
// read what the canvas shows.
(window as unknown as { perflspChartInfo: () => unknown }).perflspChartInfo = () => {
  const scales = chart?.options.scales as Record<string, { title?: { text?: unknown } }> | undefined;
  return {
    x: scales?.x?.title?.text,
    y: scales?.y?.title?.text,
    legend: (chart?.data.datasets ?? []).map((d) => d.label),
    highlighted,
    tooltip: (chart?.tooltip?.body ?? []).flatMap((b) => b.lines),
    roofWidths: Object.fromEntries(
      ((chart?.data.datasets ?? []) as RoofDataset[]).filter((d) => d.roof).map((d): [string, unknown] => [d.roof ?? "", d.borderWidth]),
    ),
  };
};

vscode.postMessage({ type: "ready" });
