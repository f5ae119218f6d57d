// perflsp for VS Code: starts the language server and adds the status bar, GPU picker, roofline
// view and commands around it.
import * as vscode from "vscode";
import { API_KEY_SECRET, ServerManager } from "./client";
import { gpuItems, parseGpuList } from "./gpuPicker";
import { newProjectConfig, withGpus } from "./projectConfig";
import { errorMessage } from "./errors";
import { RooflinePanel } from "./rooflinePanel";
import { statusView } from "./status";

let manager: ServerManager | undefined;

const EXPLAIN_SCHEME = "perflsp-explanation";
/** `publisher.name#walkthrough id` (package.json `contributes.walkthroughs`). */
export const WALKTHROUGH_ID = "perflsp.perflsp#gettingStarted";
const explanations = new Map<string, string>(); // uri -> Markdown of an explanation
const explanationChanged = new vscode.EventEmitter<vscode.Uri>();

export function activate(context: vscode.ExtensionContext): { manager: ServerManager } {
  const output = vscode.window.createOutputChannel("perflsp", { log: true });
  const server = new ServerManager(context, output);
  manager = server;
  const roofline = new RooflinePanel(context.extensionUri, server);

  const item = vscode.window.createStatusBarItem("perflsp.status", vscode.StatusBarAlignment.Right, 100);
  item.name = "perflsp";
  const paint = () => {
    const view = statusView(server.state, server.status, server.problem?.message);
    item.text = view.text;
    item.tooltip = new vscode.MarkdownString(view.tooltip, true);
    item.command = view.command;
    item.backgroundColor = view.severity ? new vscode.ThemeColor(`statusBarItem.${view.severity}Background`) : undefined;
    item.show();
  };
  paint();

  context.subscriptions.push(
    output,
    server,
    roofline,
    item,
    server.onDidChange(paint),
    explanationChanged,
    vscode.workspace.registerTextDocumentContentProvider(EXPLAIN_SCHEME, {
      onDidChange: explanationChanged.event,
      provideTextDocumentContent: (uri) => explanations.get(uri.toString()) ?? "",
    }),
    vscode.workspace.onDidCloseTextDocument((doc) => explanations.delete(doc.uri.toString())),
    vscode.commands.registerCommand("perflsp.restartServer", () => server.restart()),
    vscode.commands.registerCommand("perflsp.showOutput", () => output.show()),
    vscode.commands.registerCommand("perflsp.showRoofline", () => roofline.show()),
    vscode.commands.registerCommand("perflsp.chooseGpus", () => chooseGpus(server)),
    vscode.commands.registerCommand("perflsp.explainKernelAtCursor", () => runKernelCommand(server, "perflsp.explainKernel")),
    vscode.commands.registerCommand("perflsp.profileKernelAtCursor", () => runKernelCommand(server, "perflsp.profileKernel")),
    vscode.commands.registerCommand("perflsp.openRuleDocs", (code?: string) => openRuleDocs(code)),
    vscode.commands.registerCommand("perflsp.importProfileFromFile", (file?: vscode.Uri) => importProfile(server, roofline, file)),
    vscode.commands.registerCommand("perflsp.setLlmApiKey", () => setApiKey(context, server)),
    vscode.commands.registerCommand("perflsp.openWalkthrough", () =>
      vscode.commands.executeCommand("workbench.action.openWalkthrough", WALKTHROUGH_ID, false),
    ),
    vscode.commands.registerCommand("perflsp.writeProjectConfig", () => writeProjectConfig(server)),
    vscode.commands.registerCommand("perflsp.clearLlmApiKey", async () => {
      await context.secrets.delete(API_KEY_SECRET);
      void vscode.window.showInformationMessage("perflsp: the LLM API key was removed; restarting the server.");
      await server.restart();
    }),
  );
  server.explainHandler = (arg) => explain(server, arg.uri, arg.kernel);
  void server.start();
  return { manager: server };
}

export async function deactivate(): Promise<void> {
  await manager?.stop();
}

async function chooseGpus(server: ServerManager): Promise<void> {
  let gpus;
  let current: string[];
  try {
    const answer = await server.execute<{ gpus?: unknown; selected?: string[] }>("perflsp.listGpus", {});
    gpus = parseGpuList(answer);
    current = answer?.selected ?? server.status?.gpus.map((g) => g.id) ?? [];
  } catch (err) {
    void vscode.window.showErrorMessage(`perflsp: cannot list GPUs: ${errorMessage(err)}`);
    return;
  }
  const items = gpuItems(gpus, current).map((i) =>
    i.kind === "separator"
      ? { label: i.label, kind: vscode.QuickPickItemKind.Separator, id: "" }
      : { label: i.label, description: i.description, detail: i.detail, picked: i.picked, id: i.id },
  );
  const picked = await vscode.window.showQuickPick(items, {
    canPickMany: true,
    matchOnDescription: true,
    matchOnDetail: true,
    title: "perflsp: GPUs to classify kernels on",
    placeHolder: "Type to filter by name, id or architecture; each kernel gets a verdict per GPU",
  });
  if (!picked || picked.length === 0) {
    return;
  }
  // The server keeps the choice for this session, above the settings and .perflsp.toml.
  try {
    await server.execute("perflsp.setGpus", { gpus: picked.map((p) => p.id) });
  } catch (err) {
    void vscode.window.showErrorMessage(`perflsp: cannot select GPUs: ${errorMessage(err)}`);
  }
}

/** The GPUs in use now: the server's (a picker choice included), else the `perflsp.gpus` setting. */
function gpusInUse(server: ServerManager, folder: vscode.WorkspaceFolder): string[] {
  const fromServer = server.status?.gpus.map((g) => g.id).filter(Boolean) ?? [];
  if (fromServer.length > 0) {
    return fromServer;
  }
  return vscode.workspace.getConfiguration("perflsp", folder.uri).get<string[]>("gpus") ?? ["h100"];
}

/** "Write .perflsp.toml": the GPUs in use into the workspace folder's `.perflsp.toml` (created with
 * commented examples, or only its `gpus` line replaced), then opened. */
async function writeProjectConfig(server: ServerManager): Promise<void> {
  const folders = vscode.workspace.workspaceFolders ?? [];
  const folder = folders.length > 1 ? await vscode.window.showWorkspaceFolderPick({ placeHolder: "perflsp: the folder whose .perflsp.toml to write" }) : folders[0];
  if (!folder) {
    if (folders.length === 0) {
      void vscode.window.showWarningMessage("perflsp: open a folder first: .perflsp.toml lives at the root of a workspace folder.");
    }
    return;
  }
  const uri = vscode.Uri.joinPath(folder.uri, ".perflsp.toml");
  const gpus = gpusInUse(server, folder);
  let text: string;
  try {
    const existing = new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
    text = withGpus(existing, gpus);
  } catch {
    text = newProjectConfig(gpus);
  }
  try {
    await vscode.workspace.fs.writeFile(uri, new TextEncoder().encode(text));
    await vscode.window.showTextDocument(uri, { preview: false });
    void vscode.window.showInformationMessage(`perflsp: wrote gpus = [${gpus.join(", ")}] to .perflsp.toml; commit it so the whole team and CI use the same GPUs.`);
  } catch (err) {
    void vscode.window.showErrorMessage(`perflsp: cannot write ${uri.fsPath}: ${errorMessage(err)}`);
  }
}

interface KernelEntry {
  name: string;
  range: { start: { line: number }; end: { line: number } };
}

/** The kernel whose definition holds the cursor, else the nearest one above it. */
async function kernelAtCursor(server: ServerManager, editor: vscode.TextEditor): Promise<string | undefined> {
  const uri = editor.document.uri.toString();
  const data = await server.execute<{ kernels?: KernelEntry[] }>("perflsp.rooflineData", { scope: "open", uri });
  const line = editor.selection.active.line;
  const kernels = (data?.kernels ?? []).filter((k) => k.range.start.line <= line).sort((a, b) => b.range.start.line - a.range.start.line);
  return kernels[0]?.name ?? data?.kernels?.[0]?.name;
}

/** Explain or profile the kernel at the cursor (the code lens runs the server's command directly). */
async function runKernelCommand(server: ServerManager, command: string): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    void vscode.window.showInformationMessage("perflsp: open a CUDA or OpenMP file and put the cursor in a kernel.");
    return;
  }
  try {
    const kernel = await kernelAtCursor(server, editor);
    if (!kernel) {
      void vscode.window.showInformationMessage("perflsp: no kernel in this file.");
      return;
    }
    if (command === "perflsp.explainKernel") {
      await explain(server, editor.document.uri.toString(), kernel);
      return;
    }
    const result = await server.execute<{ message?: string; status?: string }>(command, {
      uri: editor.document.uri.toString(),
      kernel,
      quiet: true,
    });
    if (typeof result?.message === "string") {
      const show = result.status === "ok" ? vscode.window.showInformationMessage : vscode.window.showWarningMessage;
      void show(`perflsp: ${result.message}`);
    }
  } catch (err) {
    void vscode.window.showErrorMessage(`perflsp: ${errorMessage(err)}`);
  }
}

/**
 * The explanation of `kernel` as a read-only Markdown preview (no "save changes?" on close). With
 * an LLM the server streams it (`perflsp/explanation`): the preview opens with the first part and
 * grows as the model writes; without one, the static explanation arrives at once.
 */
async function explain(server: ServerManager, docUri: string, kernel: string): Promise<void> {
  const uri = vscode.Uri.from({ scheme: EXPLAIN_SCHEME, path: `/${kernel}.md`, query: String(Date.now()) });
  const key = uri.toString();
  let opened: Thenable<unknown> | undefined;
  const show = (markdown: string) => {
    explanations.set(key, `# ${kernel}\n\n${markdown}`);
    if (opened) {
      explanationChanged.fire(uri);
    } else {
      opened = vscode.commands.executeCommand("markdown.showPreview", uri);
    }
  };
  const listener = server.onExplanation((update) => {
    if (update.id === key) {
      show(update.markdown);
    }
  });
  try {
    const result = await server.execute<{ markdown?: string }>("perflsp.explainKernel", { uri: docUri, kernel, quiet: true, streamId: key });
    if (typeof result?.markdown === "string") {
      show(result.markdown);
    }
    await opened;
  } catch (err) {
    void vscode.window.showErrorMessage(`perflsp: ${errorMessage(err)}`);
  } finally {
    listener.dispose();
  }
}

/** "Import Profile…": an Nsight Compute report (.ncu-rep or CSV) into the workspace's .perflsp/. */
async function importProfile(server: ServerManager, roofline: RooflinePanel, file?: vscode.Uri): Promise<void> {
  const folder = vscode.workspace.workspaceFolders?.[0];
  if (!folder) {
    void vscode.window.showWarningMessage("perflsp: open a folder first: imported results are stored under its .perflsp/ folder.");
    return;
  }
  let target = file;
  if (!target) {
    const picked = await vscode.window.showOpenDialog({
      title: "perflsp: import Nsight Compute results",
      openLabel: "Import",
      canSelectMany: false,
      defaultUri: folder.uri,
      filters: { "Nsight Compute reports": ["ncu-rep", "csv"], "All files": ["*"] },
    });
    target = picked?.[0];
  }
  if (!target) {
    return;
  }
  try {
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `perflsp: importing ${target.fsPath.split("/").pop()}` },
      () => server.execute<{ message?: string }>("perflsp.importProfile", { path: target.fsPath, uri: folder.uri.toString(), quiet: true }),
    );
    void vscode.window.showInformationMessage(`perflsp: ${result?.message ?? "imported"}`);
    void roofline.refresh();
  } catch (err) {
    void vscode.window.showErrorMessage(`perflsp: ${errorMessage(err)}`);
  }
}

async function setApiKey(context: vscode.ExtensionContext, server: ServerManager): Promise<void> {
  const key = await vscode.window.showInputBox({
    title: "perflsp: LLM API key",
    prompt: "Kept in VS Code's secret storage and given to the perflsp server only; sent only to the endpoint set in your settings.",
    password: true,
    ignoreFocusOut: true,
  });
  if (!key) {
    return;
  }
  await context.secrets.store(API_KEY_SECRET, key);
  void vscode.window.showInformationMessage("perflsp: LLM API key stored; restarting the server.");
  await server.restart();
}

async function openRuleDocs(code?: string): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const perflsp = (d: vscode.Diagnostic) => d.source === "perflsp" && typeof d.code === "object" && d.code.target;
  const all = vscode.languages.getDiagnostics().flatMap(([, ds]) => ds.filter(perflsp));
  let target: vscode.Uri | undefined;
  if (code) {
    target = all.map((d) => d.code as { value: string; target: vscode.Uri }).find((c) => String(c.value) === code)?.target;
  }
  if (!target && editor) {
    const here = vscode.languages.getDiagnostics(editor.document.uri).filter((d) => perflsp(d) && d.range.contains(editor.selection.active));
    target = (here[0]?.code as { target: vscode.Uri } | undefined)?.target;
  }
  if (!target) {
    const byCode = new Map<string, vscode.Uri>();
    for (const d of all) {
      const c = d.code as { value: string; target: vscode.Uri };
      byCode.set(String(c.value), c.target);
    }
    if (byCode.size === 0) {
      void vscode.window.showInformationMessage("perflsp: no perflsp diagnostics yet; open a CUDA file to see its rules.");
      return;
    }
    const pick = await vscode.window.showQuickPick([...byCode.keys()].sort(), { title: "perflsp: open the documentation of a rule" });
    target = pick ? byCode.get(pick) : undefined;
  }
  if (target) {
    await vscode.commands.executeCommand("vscode.open", target);
  }
}
