// perflsp for VS Code: starts the language server and adds the status bar, GPU picker, roofline
// view and commands around it.
import * as vscode from "vscode";
import { ServerManager } from "./client";
import { gpuItems, parseGpuList } from "./gpuPicker";
import { RooflinePanel } from "./rooflinePanel";
import { statusView } from "./status";

let manager: ServerManager | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<{ manager: ServerManager }> {
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
    vscode.commands.registerCommand("perflsp.restartServer", () => server.restart()),
    vscode.commands.registerCommand("perflsp.showOutput", () => output.show()),
    vscode.commands.registerCommand("perflsp.showRoofline", () => roofline.show()),
    vscode.commands.registerCommand("perflsp.chooseGpus", () => chooseGpus(server)),
    vscode.commands.registerCommand("perflsp.explainKernelAtCursor", () => runKernelCommand(server, "perflsp.explainKernel")),
    vscode.commands.registerCommand("perflsp.profileKernelAtCursor", () => runKernelCommand(server, "perflsp.profileKernel")),
    vscode.commands.registerCommand("perflsp.openRuleDocs", (code?: string) => openRuleDocs(code)),
  );
  void server.start();
  return { manager: server };
}

export async function deactivate(): Promise<void> {
  await manager?.stop();
}

async function chooseGpus(server: ServerManager): Promise<void> {
  let gpus;
  try {
    gpus = parseGpuList(await server.execute("perflsp.listGpus"));
  } catch (err) {
    void vscode.window.showErrorMessage(`perflsp: cannot list GPUs: ${err instanceof Error ? err.message : err}`);
    return;
  }
  const current = server.status?.gpus.map((g) => g.id) ?? vscode.workspace.getConfiguration("perflsp").get<string[]>("gpus") ?? [];
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
  const ids = picked.map((p) => p.id);
  // The server owns the choice (it also knows about `.perflsp.toml`); it answers how it stored it.
  try {
    await server.execute("perflsp.selectGpus", ids);
  } catch (err) {
    void vscode.window.showErrorMessage(`perflsp: cannot select GPUs: ${err instanceof Error ? err.message : err}`);
  }
}

/** Runs a kernel command for the kernel at (or above) the cursor, with the code lens's own arguments. */
async function runKernelCommand(server: ServerManager, command: string): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    void vscode.window.showInformationMessage("perflsp: open a CUDA or OpenMP file and put the cursor in a kernel.");
    return;
  }
  const lenses = (await vscode.commands.executeCommand<vscode.CodeLens[]>("vscode.executeCodeLensProvider", editor.document.uri, 100)) ?? [];
  const line = editor.selection.active.line;
  const candidates = lenses
    .filter((l) => l.command?.command === command && l.range.start.line <= line)
    .sort((a, b) => b.range.start.line - a.range.start.line);
  const args = candidates[0]?.command?.arguments ?? [{ uri: editor.document.uri.toString(), position: editor.selection.active }];
  try {
    const result = await server.execute<unknown>(command, ...args);
    await showResult(result);
  } catch (err) {
    void vscode.window.showErrorMessage(`perflsp: ${err instanceof Error ? err.message : err}`);
  }
}

async function showResult(result: unknown): Promise<void> {
  const markdown =
    typeof result === "string"
      ? result
      : typeof (result as { markdown?: unknown })?.markdown === "string"
        ? (result as { markdown: string }).markdown
        : undefined;
  if (markdown) {
    const doc = await vscode.workspace.openTextDocument({ language: "markdown", content: markdown });
    await vscode.commands.executeCommand("markdown.showPreview", doc.uri);
  }
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
