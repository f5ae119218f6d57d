// Status bar text for the server's `perflsp/status` notification. No `vscode` import.

export type LlmState = "off" | "ready" | "busy" | "failing";

export interface GpuRef {
  id: string;
  name?: string;
}

export interface ServerStatus {
  gpus: GpuRef[];
  llm: LlmState;
  llmDetail?: string;
  /** whether the server honours trusted-only settings (the editor told it the workspace is trusted) */
  trusted?: boolean;
}

export type ClientState = "starting" | "running" | "stopped" | "failed";

export interface StatusView {
  text: string;
  tooltip: string;
  /** "warning" | "error" paint the item's background; undefined leaves it plain */
  severity?: "warning" | "error";
  command: string;
}

const LLM_STATES: LlmState[] = ["off", "ready", "busy", "failing"];

/** Accepts `{gpus: ["h100"] | [{id, name}], llm: "ready" | {state, detail}}`. */
export function parseStatus(raw: unknown): ServerStatus {
  const obj = (raw && typeof raw === "object" ? raw : {}) as Record<string, unknown>;
  const gpus: GpuRef[] = [];
  for (const g of Array.isArray(obj.gpus) ? obj.gpus : []) {
    if (typeof g === "string") {
      gpus.push({ id: g });
    } else if (g && typeof g === "object" && typeof (g as GpuRef).id === "string") {
      gpus.push({ id: (g as GpuRef).id, name: typeof (g as GpuRef).name === "string" ? (g as GpuRef).name : undefined });
    }
  }
  let llm: LlmState = "off";
  let llmDetail: string | undefined;
  const rawLlm = obj.llm;
  const state = typeof rawLlm === "string" ? rawLlm : (rawLlm as { state?: unknown } | undefined)?.state;
  if (typeof state === "string" && (LLM_STATES as string[]).includes(state)) {
    llm = state as LlmState;
  }
  const detail = (rawLlm as { detail?: unknown } | undefined)?.detail ?? obj.llmReason ?? obj.llmDetail;
  if (typeof detail === "string" && detail) {
    llmDetail = detail;
  }
  return { gpus, llm, llmDetail, trusted: typeof obj.trusted === "boolean" ? obj.trusted : undefined };
}

const LLM_ICON: Record<LlmState, string> = { off: "", ready: "$(sparkle)", busy: "$(sync~spin)", failing: "$(warning)" };

export function gpuLabel(gpus: GpuRef[]): string {
  if (gpus.length === 0) {
    return "no GPU";
  }
  if (gpus.length === 1) {
    return gpus[0].name ?? gpus[0].id;
  }
  return gpus.map((g) => g.id).join(", ");
}

export function statusView(client: ClientState, status: ServerStatus | undefined, problem?: string): StatusView {
  if (client === "failed" || problem) {
    return {
      text: "$(error) perflsp",
      tooltip: problem ?? "The perflsp server is not running. Click to show its log.",
      severity: "error",
      command: "perflsp.showOutput",
    };
  }
  if (client === "starting" || !status) {
    return { text: "$(loading~spin) perflsp", tooltip: "perflsp: starting the server…", command: "perflsp.showOutput" };
  }
  if (client === "stopped") {
    return { text: "$(circle-slash) perflsp", tooltip: "perflsp: the server is stopped. Run “perflsp: Restart Server”.", command: "perflsp.restartServer" };
  }
  const llm = status.llm === "off" ? "" : ` ${LLM_ICON[status.llm]} LLM ${status.llm}`;
  const gpuLines = status.gpus.map((g) => `- ${g.name ? `${g.name} (\`${g.id}\`)` : `\`${g.id}\``}`);
  const tooltip = [
    "**perflsp** — roofline verdicts on:",
    ...gpuLines,
    "",
    `LLM advisor: ${status.llm}${status.llmDetail ? ` — ${status.llmDetail}` : ""}`,
    "",
    ...(status.trusted === undefined
      ? []
      : [
          status.trusted
            ? "Workspace: trusted"
            : "Workspace: restricted — settings that run programs or send code off the machine are taken from your user settings only",
          "",
        ]),
    "Click to choose GPUs.",
  ].join("\n");
  return {
    text: `$(dashboard) ${gpuLabel(status.gpus)}${llm}`,
    tooltip,
    severity: status.llm === "failing" ? "warning" : undefined,
    command: "perflsp.chooseGpus",
  };
}
