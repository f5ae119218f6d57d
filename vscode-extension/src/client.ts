// Starts, restarts and stops the perflsp language server (`python -m perflsp serve`).
import * as os from "node:os";
import * as vscode from "vscode";
import {
  CloseAction,
  DidChangeConfigurationNotification,
  ErrorAction,
  LanguageClient,
  RevealOutputChannelOn,
  State,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";
import { PythonExtension } from "@vscode/python-extension";
import { chooseInterpreter, expandPath, installSource, probe, type Interpreter, type Problem } from "./interpreter";
import { contributedKeys, sameSettings, splitByOrigin, type Nested } from "./settingsLayers";
import { errorMessage } from "./errors";
import { parseStatus, type ClientState, type ServerStatus } from "./status";

export const DOCUMENT_SELECTOR = [
  { scheme: "file", language: "cuda-cpp" },
  { scheme: "file", language: "cpp" },
  { scheme: "file", language: "c" },
  { scheme: "untitled", language: "cuda-cpp" },
];

/** Settings whose change needs a new server process (the rest the server re-reads itself). */
const RESTART_SETTINGS = ["perflsp.python.path"];

/** Where the LLM API key lives in VS Code's secret storage. It reaches the server only as the
 * environment variable below of the server process: never in a protocol message (which the
 * client's trace would log), never in a settings file. */
export const API_KEY_SECRET = "perflsp.llmApiKey";
const API_KEY_ENV = "PERFLSP_LLM_API_KEY";

/** `perflsp/explanation`: a streamed explanation's Markdown so far (`done` on the last one). */
export interface ExplanationUpdate {
  id: string;
  uri: string;
  kernel: string;
  markdown: string;
  done: boolean;
}

export class ServerManager implements vscode.Disposable {
  client: LanguageClient | undefined;
  status: ServerStatus | undefined;
  state: ClientState = "stopped";
  problem: Problem | undefined;
  interpreter: Interpreter | undefined;
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;
  private readonly explanation = new vscode.EventEmitter<ExplanationUpdate>();
  readonly onExplanation = this.explanation.event;
  /** Runs the server's `perflsp.explainKernel` when a code lens asks for it (opens the explanation). */
  explainHandler: ((arg: { uri: string; kernel: string }) => Promise<void>) | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private python: PythonExtension | undefined;
  private starting: Promise<void> | undefined;

  constructor(
    private readonly context: vscode.ExtensionContext,
    readonly output: vscode.LogOutputChannel,
  ) {
    this.disposables.push(
      this.changed,
      this.explanation,
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (RESTART_SETTINGS.some((s) => e.affectsConfiguration(s))) {
          this.output.appendLine("[client] interpreter settings changed: restarting the server");
          void this.restart();
        } else if (e.affectsConfiguration("perflsp")) {
          if (this.client && this.userSettingsSent && !sameSettings(this.userSettings(), this.userSettingsSent)) {
            // user-level settings reach the server as initializationOptions (their origin matters for trust)
            this.output.appendLine("[client] user settings changed: restarting the server");
            void this.restart();
          } else {
            this.notifyConfigurationChanged();
          }
        }
      }),
      // Trust granted while the server runs: it re-reads the settings, now with the trusted ones.
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        this.output.appendLine("[client] workspace trust granted: telling the server");
        this.notifyConfigurationChanged();
      }),
    );
  }

  private userSettingsSent: Nested | undefined;

  private settingKeys(): string[] {
    return contributedKeys(this.context.extension.packageJSON);
  }

  /** perflsp settings set in the user's settings (not defaults, not the workspace's). */
  userSettings(): Nested {
    const config = vscode.workspace.getConfiguration("perflsp");
    return splitByOrigin(this.settingKeys(), (key) => config.inspect(key)).user;
  }

  /** perflsp settings set by the workspace or the folder of `scopeUri`. */
  workspaceSettings(scopeUri: string | undefined): Nested {
    const config = vscode.workspace.getConfiguration("perflsp", scopeUri ? vscode.Uri.parse(scopeUri) : undefined);
    return splitByOrigin(this.settingKeys(), (key) => config.inspect(key)).workspace;
  }

  private setState(state: ClientState): void {
    this.state = state;
    this.changed.fire();
  }

  private async pythonExtensionCommand(): Promise<string[] | undefined> {
    if (!vscode.extensions.getExtension("ms-python.python")) {
      return undefined;
    }
    try {
      if (!this.python) {
        this.python = await PythonExtension.api();
        this.disposables.push(
          this.python.environments.onDidChangeActiveEnvironmentPath(() => {
            if (this.interpreter?.source === "python-extension") {
              this.output.appendLine("[client] the Python extension's environment changed: restarting the server");
              void this.restart();
            }
          }),
        );
      }
      const resource = vscode.workspace.workspaceFolders?.[0]?.uri;
      const env = await this.python.environments.resolveEnvironment(this.python.environments.getActiveEnvironmentPath(resource));
      const exe = env?.executable.uri?.fsPath;
      return exe ? [exe] : undefined;
    } catch (err) {
      this.output.appendLine(`[client] the Python extension gave no interpreter: ${errorMessage(err)}`);
      return undefined;
    }
  }

  async resolveInterpreter(): Promise<Interpreter> {
    const config = vscode.workspace.getConfiguration("perflsp");
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const configured = config.get<string>("python.path");
    const fromSetting = configured ? expandPath(configured, folder, os.homedir()) : undefined;
    return chooseInterpreter(fromSetting, fromSetting ? undefined : await this.pythonExtensionCommand());
  }

  start(): Promise<void> {
    this.starting ??= this.doStart().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async doStart(): Promise<void> {
    this.problem = undefined;
    this.status = undefined;
    this.setState("starting");
    const interpreter = await this.resolveInterpreter();
    this.interpreter = interpreter;
    this.output.appendLine(`[client] interpreter: ${interpreter.command.join(" ")} (${interpreter.source})`);
    const env: NodeJS.ProcessEnv = { ...process.env };
    const secret = await this.context.secrets.get(API_KEY_SECRET);
    if (secret) {
      env[API_KEY_ENV] = secret;
    }
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    // where the server will run: same sys.path
    const checked = await probe(interpreter, env, 15000, cwd, installSource(this.context.extensionPath));
    if (!checked.ok && checked.problem) {
      this.fail(checked.problem);
      return;
    }
    this.output.appendLine(`[client] perflsp ${checked.version} found; starting the server`);
    const [exe, ...pre] = interpreter.command;
    const serverOptions: ServerOptions = {
      command: exe,
      args: [...pre, "-m", "perflsp", "serve"],
      options: { env, cwd },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: DOCUMENT_SELECTOR,
      outputChannel: this.output,
      traceOutputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      // one clear notification of ours (see fail) instead of the client library's generic ones
      initializationFailedHandler: () => false,
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue }),
        // A server that dies before it ever ran is not restarted (the notification says why); one
        // that crashes later is restarted by the library's default policy.
        closed: async () => {
          if (!everRan) {
            return { action: CloseAction.DoNotRestart, handled: true };
          }
          return (defaultHandler ??= client.createDefaultErrorHandler(4)).closed();
        },
      },
      // User-level settings travel here, so the server knows they are the user's own (trusted-only
      // settings are honoured from here even in an untrusted workspace); the trust flag with them.
      initializationOptions: { workspaceTrusted: vscode.workspace.isTrusted, settings: (this.userSettingsSent = this.userSettings()) },
      middleware: {
        // A code lens's "explain" opens the explanation (streamed) instead of only a message.
        executeCommand: async (command, args, next) => {
          const arg = args?.[0] as { uri?: unknown; kernel?: unknown } | undefined;
          if (command === "perflsp.explainKernel" && this.explainHandler && typeof arg?.uri === "string" && typeof arg?.kernel === "string") {
            return this.explainHandler({ uri: arg.uri, kernel: arg.kernel });
          }
          return (await next(command, args)) as unknown;
        },
        workspace: {
          // workspace/configuration answers with what the workspace and folder set (defaults and
          // user values are not the workspace's), plus the trust flag: the editor's to say, never a
          // settings file's.
          configuration: async (params, token, next) => {
            const result = await next(params, token);
            if (!Array.isArray(result)) {
              return result;
            }
            return (result as unknown[]).map((value, i): unknown => {
              const item = params.items[i];
              if (item?.section === "perflsp") {
                return { ...this.workspaceSettings(item.scopeUri), trustedWorkspace: vscode.workspace.isTrusted };
              }
              return value;
            });
          },
        },
      },
    };
    let everRan = false;
    let defaultHandler: ReturnType<LanguageClient["createDefaultErrorHandler"]> | undefined;
    const client = new LanguageClient("perflsp", "perflsp", serverOptions, clientOptions);
    this.client = client;
    client.onDidChangeState((e) => {
      if (e.newState === State.Running) {
        everRan = true;
        this.setState("running");
      } else if (e.newState === State.Stopped && this.client === client) {
        this.setState(this.problem ? "failed" : "stopped");
      }
    });
    client.onNotification("perflsp/status", (raw: unknown) => {
      this.status = parseStatus(raw);
      this.changed.fire();
    });
    client.onNotification("perflsp/explanation", (update: ExplanationUpdate) => this.explanation.fire(update));
    try {
      await client.start();
    } catch (err) {
      this.fail({
        kind: "perflsp-broken",
        message: `perflsp: the server (${[...interpreter.command, "-m", "perflsp", "serve"].join(" ")}) stopped while starting. Its log is in the “perflsp” output.`,
        detail: String(err),
      });
    }
  }

  private fail(problem: Problem): void {
    this.problem = problem;
    this.output.appendLine(`[client] ${problem.message}`);
    if (problem.detail) {
      this.output.appendLine(problem.detail.trimEnd());
    }
    this.setState("failed");
    const actions = problem.fixCommand ? ["Install in Terminal", "Open Settings", "Show Log"] : ["Open Settings", "Show Log"];
    void vscode.window.showErrorMessage(problem.message, ...actions).then((choice) => {
      if (choice === "Install in Terminal" && problem.fixCommand) {
        const terminal = vscode.window.createTerminal("perflsp install");
        terminal.show();
        terminal.sendText(problem.fixCommand);
      } else if (choice === "Open Settings") {
        void vscode.commands.executeCommand("workbench.action.openSettings", "perflsp.python.path");
      } else if (choice === "Show Log") {
        this.output.show();
      }
    });
  }

  notifyConfigurationChanged(): void {
    if (this.client?.isRunning()) {
      // `settings: null`: the server pulls the new values with workspace/configuration
      void this.client.sendNotification(DidChangeConfigurationNotification.type, { settings: null });
    }
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.stop(5000);
      } catch (err) {
        this.output.appendLine(`[client] stopping the server: ${errorMessage(err)}`);
      }
      await client.dispose().catch(() => undefined);
    }
    this.setState("stopped");
  }

  async restart(): Promise<void> {
    await this.starting?.catch(() => undefined);
    await this.stop();
    await this.start();
  }

  /** `workspace/executeCommand` on the server; throws a readable error when it is not running. */
  async execute<T>(command: string, ...args: unknown[]): Promise<T> {
    await this.starting;
    if (!this.client?.isRunning()) {
      throw new Error(this.problem?.message ?? "The perflsp server is not running (see the “perflsp” output).");
    }
    return this.client.sendRequest<T>("workspace/executeCommand", { command, arguments: args });
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
    void this.stop();
  }
}
