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
import { axesFor, describePoint, formatNumber, normalise, roofLine, sortRoofs, type GpuView, type KernelPoint } from "./model";

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
      int32: themeColor("descriptionForeground", "#9d9d9d"),
    } as Record<string, string>,
    verdict: {
      compute: themeColor("charts-red", "#f14c4c"),
      bandwidth: themeColor("charts-blue", "#3794ff"),
      uncertain: themeColor("charts-yellow", "#cca700"),
    } as Record<string, string>,
  };
}

type PointData = { x: number; y: number; point: KernelPoint };

function datasets(view: GpuView): ChartDataset<"scatter" | "line", (PointData | { x: number; y: number })[]>[] {
  const colors = palette();
  const axes = axesFor(view);
  const out: ChartDataset<"scatter" | "line", (PointData | { x: number; y: number })[]>[] = [];
  for (const roof of sortRoofs(view.roofs)) {
    out.push({
      type: "line",
      label: `${roof.precision} roof (${formatNumber(roof.peakGflops / 1000)} TFLOP/s, ridge ${formatNumber(roof.ridge)})`,
      data: roofLine(roof, view.bandwidthGbs, axes),
      borderColor: colors.roof[roof.precision] ?? colors.foreground,
      borderWidth: 2,
      pointRadius: 0,
      pointHitRadius: 0,
      fill: false,
    });
  }
  for (const kind of ["predicted", "measured"] as const) {
    for (const verdict of ["compute", "bandwidth", "uncertain"]) {
      const points = view.points.filter((p) => p.kind === kind && p.verdict === verdict);
      if (points.length === 0) {
        continue;
      }
      const color = colors.verdict[verdict];
      out.push({
        type: "scatter",
        label: `${kind} · ${verdict === "uncertain" ? "uncertain" : verdict + "-bound"}`,
        data: points.map((p) => ({ x: p.intensity, y: p.gflops, point: p })),
        // predicted: hollow circles; measured: filled diamonds
        pointStyle: kind === "predicted" ? "circle" : "rectRot",
        pointRadius: kind === "predicted" ? 6 : 7,
        pointHoverRadius: 9,
        pointBorderWidth: 2,
        borderColor: color,
        backgroundColor: kind === "predicted" ? "transparent" : color,
      });
    }
  }
  return out;
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
          title: { display: true, text: "Arithmetic intensity (FLOP / DRAM byte)" },
          grid: { color: colors.grid },
          ticks: { callback: (v) => logTick(Number(v)) },
        },
        y: {
          type: "logarithmic",
          min: axes.yMin,
          max: axes.yMax,
          title: { display: true, text: "Performance (GFLOP/s, GOP/s for int32)" },
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
        if (target) {
          target.style.cursor = elements.some((e) => chart?.data.datasets[e.datasetIndex].type === "scatter") ? "pointer" : "default";
        }
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
    for (const text of [p.stale ? `${p.kind} (stale)` : p.kind, p.precision, formatNumber(p.intensity), formatNumber(p.gflops), p.verdict]) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.append(cell);
    }
    row.className = `verdict-${p.verdict} kind-${p.kind}`;
    body.append(row);
  }
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
type DrawnPoint = { x: number; y: number; kernel: string; uri: string; line: number };
(window as unknown as { perflspPointPosition: (n: number) => DrawnPoint | undefined }).perflspPointPosition = (n) => {
  const points = (chart?.data.datasets ?? [])
    .map((d, i) => ({ d, i }))
    .filter(({ d }) => d.type === "scatter")
    .flatMap(({ d, i }) =>
      chart!.getDatasetMeta(i).data.map((e, j) => {
        const p = (d.data[j] as PointData).point;
        return { x: e.x, y: e.y, kernel: p.kernel, uri: p.uri, line: p.line };
      }),
    );
  return points[n];
};

vscode.postMessage({ type: "ready" });
