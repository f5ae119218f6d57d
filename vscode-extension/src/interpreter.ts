// Which Python runs the server, and whether perflsp is importable there. No `vscode` import:
// unit-tested under plain Node.
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

export type InterpreterSource = "setting" | "python-extension" | "default";

export interface Interpreter {
  /** argv prefix: the executable, then any arguments it needs before `-m perflsp serve` */
  command: string[];
  source: InterpreterSource;
}

/** Setting `perflsp.python.path`, else the Python extension's active environment, else `python3`. */
export function chooseInterpreter(settingPath: string | undefined, pythonExtensionPath: string[] | undefined): Interpreter {
  const fromSetting = settingPath?.trim();
  if (fromSetting) {
    return { command: [fromSetting], source: "setting" };
  }
  if (pythonExtensionPath && pythonExtensionPath.length > 0 && pythonExtensionPath[0]) {
    return { command: pythonExtensionPath, source: "python-extension" };
  }
  return { command: ["python3"], source: "default" };
}

/** Expands `${workspaceFolder}`, `${userHome}` and `~` in a configured path. */
export function expandPath(value: string, workspaceFolder: string | undefined, home: string): string {
  let out = value.trim();
  if (out === "~" || out.startsWith("~/")) {
    out = home + out.slice(1);
  }
  out = out.replace(/\$\{userHome\}/g, home);
  if (workspaceFolder !== undefined) {
    out = out.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  }
  return out;
}

export type ProblemKind = "interpreter-missing" | "perflsp-missing" | "perflsp-broken" | "too-old";

export interface Problem {
  kind: ProblemKind;
  /** one sentence for the notification */
  message: string;
  /** a shell command that fixes it, when there is one */
  fixCommand?: string;
  /** what the check printed, for the output channel */
  detail: string;
}

export interface ProbeResult {
  ok: boolean;
  version?: string;
  problem?: Problem;
}

// perflsp itself, then the server's module with everything it imports (pygls, tree-sitter, ...):
// a half-installed perflsp is named here rather than as a server that dies while starting.
const PROBE = "import perflsp\nprint(perflsp.__version__)\nimport perflsp.server.app\n";
const MIN_PYTHON = "3.11";

function describe(interpreter: Interpreter): string {
  const how = {
    "setting": "the perflsp.python.path setting",
    "python-extension": "the Python extension's active environment",
    "default": "the default (python3 on PATH)",
  }[interpreter.source];
  return `${interpreter.command.join(" ")} (from ${how})`;
}

function quote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/**
 * What `pip install` installs perflsp from (perflsp is not on PyPI): the wheel packaged into the
 * .vsix (`python/perflsp-*.whl`, built by `npm run package`), else the perflsp checkout the
 * extension runs from (a development build), else nothing known.
 */
export function installSource(extensionPath: string): string | undefined {
  const bundled = path.join(extensionPath, "python");
  try {
    const wheel = fs.readdirSync(bundled).filter((name) => /^perflsp-.*\.whl$/.test(name)).sort().pop();
    if (wheel) {
      return path.join(bundled, wheel);
    }
  } catch {
    // no bundled wheel: a development build
  }
  const checkout = path.dirname(extensionPath);
  try {
    if (/^name\s*=\s*"perflsp"/m.test(fs.readFileSync(path.join(checkout, "pyproject.toml"), "utf8"))) {
      return checkout;
    }
  } catch {
    // not inside a checkout
  }
  return undefined;
}

/**
 * Classifies a failed probe into a problem with a message that says how to fix it. `source`: what
 * perflsp installs from (see `installSource`); without one the message names the README's way.
 */
export function diagnose(interpreter: Interpreter, error: { code?: string | number | null } | null, stderr: string,
  source?: string): Problem {
  const who = describe(interpreter);
  const python = interpreter.command.map(quote).join(" ");
  const pip = source ? `${python} -m pip install ${quote(source)}` : undefined;
  const howTo = pip ?? `${python} -m pip install <a clone of the perflsp repository> (see its README)`;
  if (error && (error.code === "ENOENT" || error.code === "EACCES" || error.code === 127 || error.code === 126)) {
    return {
      kind: "interpreter-missing",
      message: `perflsp: the Python interpreter ${who} cannot be run (${error.code === "EACCES" || error.code === 126 ? "permission denied" : "not found"}). Set "perflsp.python.path" to a Python 3.11+ that has perflsp installed.`,
      detail: stderr,
    };
  }
  if (/ModuleNotFoundError: No module named 'perflsp'/.test(stderr)) {
    return {
      kind: "perflsp-missing",
      message: `perflsp is not installed in ${who}. Install it with: ${howTo}  (or point "perflsp.python.path" at an interpreter that has it).`,
      fixCommand: pip,
      detail: stderr,
    };
  }
  const dependency = /ModuleNotFoundError: No module named '([^']+)'/.exec(stderr);
  if (dependency) {
    return {
      kind: "perflsp-broken",
      message: `perflsp is installed in ${who}, but the module '${dependency[1]}' it needs is missing. Reinstall it with: ${pip ? `${pip} --force-reinstall` : howTo}`,
      fixCommand: pip && `${pip} --force-reinstall`,
      detail: stderr,
    };
  }
  if (/SyntaxError|requires Python|TypeError: unsupported operand type\(s\) for \|/.test(stderr)) {
    return {
      kind: "too-old",
      message: `perflsp needs Python ${MIN_PYTHON} or newer; ${who} is older. Set "perflsp.python.path" to a newer interpreter.`,
      detail: stderr,
    };
  }
  const last = stderr.trim().split("\n").pop() ?? "";
  return {
    kind: "perflsp-broken",
    message: `perflsp cannot be imported in ${who}: ${last || "unknown error"}. Reinstall it with: ${howTo}`,
    fixCommand: pip,
    detail: stderr,
  };
}

/** Runs the interpreter once to check that `import perflsp` works (10 s limit). */
export function probe(interpreter: Interpreter, env: NodeJS.ProcessEnv = process.env, timeoutMs = 10000, cwd?: string,
  source?: string): Promise<ProbeResult> {
  const [exe, ...pre] = interpreter.command;
  return new Promise((resolve) => {
    execFile(exe, [...pre, "-c", PROBE], { env, cwd, timeout: timeoutMs, windowsHide: true }, (error, stdout, stderr) => {
      if (!error) {
        resolve({ ok: true, version: stdout.trim().split("\n")[0] });
        return;
      }
      const code = (error as NodeJS.ErrnoException).code ?? (error as { code?: number }).code ?? null;
      resolve({ ok: false, problem: diagnose(interpreter, { code }, String(stderr || error.message), source) });
    });
  });
}
