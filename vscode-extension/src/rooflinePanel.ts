// The roofline webview: one panel, fed by the server's `perflsp.rooflineData`.
import * as crypto from "node:crypto";
import * as vscode from "vscode";
import type { ServerManager } from "./client";

export class RooflinePanel implements vscode.Disposable {
  static readonly viewType = "perflsp.roofline";
  private panel: vscode.WebviewPanel | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private refreshTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly server: ServerManager,
  ) {
    this.disposables.push(
      vscode.workspace.onDidSaveTextDocument(() => this.scheduleRefresh()),
      server.onDidChange(() => this.scheduleRefresh()),
    );
  }

  show(): void {
    if (this.panel) {
      this.panel.reveal(vscode.ViewColumn.Beside);
      void this.refresh();
      return;
    }
    const media = vscode.Uri.joinPath(this.extensionUri, "media");
    const dist = vscode.Uri.joinPath(this.extensionUri, "dist");
    const panel = vscode.window.createWebviewPanel(RooflinePanel.viewType, "perflsp: Roofline", vscode.ViewColumn.Beside, {
      enableScripts: true,
      localResourceRoots: [media, dist],
      retainContextWhenHidden: true,
    });
    panel.iconPath = vscode.Uri.joinPath(media, "roofline.svg");
    panel.webview.html = this.html(panel.webview);
    panel.webview.onDidReceiveMessage((message: { type: string; uri?: string; line?: number; character?: number }) => {
      if (message.type === "ready" || message.type === "refresh") {
        void this.refresh();
      } else if (message.type === "reveal" && message.uri) {
        void this.reveal(message.uri, message.line ?? 0, message.character ?? 0);
      }
    }, undefined, this.disposables);
    panel.onDidDispose(() => (this.panel = undefined), undefined, this.disposables);
    this.panel = panel;
  }

  private scheduleRefresh(): void {
    if (!this.panel) {
      return;
    }
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => void this.refresh(), 400);
  }

  async refresh(): Promise<void> {
    const panel = this.panel;
    if (!panel) {
      return;
    }
    try {
      const data = await this.server.execute<unknown>("perflsp.rooflineData", { scope: "workspace" });
      await panel.webview.postMessage({ type: "data", data });
    } catch (err) {
      await panel.webview.postMessage({ type: "error", error: err instanceof Error ? err.message : String(err) });
    }
  }

  private async reveal(uri: string, line: number, character: number): Promise<void> {
    const position = new vscode.Position(line, character);
    const editor = await vscode.window.showTextDocument(vscode.Uri.parse(uri), {
      viewColumn: vscode.ViewColumn.One,
      selection: new vscode.Range(position, position),
    });
    editor.revealRange(new vscode.Range(position, position), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  }

  private html(webview: vscode.Webview): string {
    const nonce = crypto.randomBytes(16).toString("base64");
    const script = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "dist", "roofline.js"));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "media", "roofline.css"));
    // Strict policy: nothing remote, no inline script or style, only our nonce'd bundle.
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `img-src ${webview.cspSource} data:`,
      `font-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style.toString()}">
<title>perflsp: Roofline</title>
</head>
<body>
<header>
  <h1>Roofline</h1>
  <label for="gpu">GPU</label>
  <select id="gpu" aria-label="GPU"></select>
  <button id="refresh" title="Re-run the analysis of the workspace">Refresh</button>
</header>
<p id="error" role="alert" hidden></p>
<p id="empty" hidden></p>
<div class="chart-box"><canvas id="chart" role="img" aria-label="Roofline chart: every kernel's arithmetic intensity against its performance, each judged against the roof of its own precision"></canvas></div>
<p id="judged" hidden></p>
<table>
  <thead><tr><th>Kernel</th><th>Point</th><th>Judged against</th><th>Intensity</th><th>Performance</th><th>Verdict</th><th>Decided by</th></tr></thead>
  <tbody id="kernels"></tbody>
</table>
<script nonce="${nonce}" src="${script.toString()}"></script>
</body>
</html>`;
  }

  dispose(): void {
    clearTimeout(this.refreshTimer);
    this.panel?.dispose();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
