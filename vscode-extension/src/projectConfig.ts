// The `.perflsp.toml` the walkthrough writes: a new file with commented examples, or an existing
// one with only its top-level `gpus` line replaced. No `vscode` import: unit-tested under plain Node.

/** `["a", "b"]` as a TOML array of basic strings. */
export function tomlStringArray(values: string[]): string {
  return `[${values.map((v) => JSON.stringify(v)).join(", ")}]`;
}

export function newProjectConfig(gpus: string[]): string {
  return `# perflsp project settings: VS Code, Neovim and \`perflsp check\` (CI) all read this file.
# Keys as in the editor settings without the \`perflsp.\` prefix; see docs/settings.md.

# GPUs to classify each kernel on (ids from \`perflsp gpus\`): one roofline verdict per GPU.
gpus = ${tomlStringArray(gpus)}

# Re-level or silence rules (error, warning, information, hint, off):
# [rules]
# "roofline/bandwidth-bound" = "hint"

# Macros and include folders for constant folding (sizes the analysis cannot see otherwise):
# compileFlags = ["-DN=4096", "-Iinclude"]

# The LLM advisor sends kernel source to its endpoint; profiling builds and runs programs. From this
# file they are honoured only when the workspace is trusted; otherwise only from user settings.
# [llm]
# enabled = true
# provider = "ollama"
# model = "qwen2.5-coder:7b"
`;
}

/**
 * `existing` with its top-level `gpus = [...]` (possibly spanning lines) replaced by `gpus`; when it
 * has none, the line is inserted before the first table header (or at the end).
 */
export function withGpus(existing: string, gpus: string[]): string {
  const line = `gpus = ${tomlStringArray(gpus)}`;
  const lines = existing.split("\n");
  const firstTable = lines.findIndex((l) => /^\s*\[/.test(l));
  const topLevelEnd = firstTable < 0 ? lines.length : firstTable;
  for (let i = 0; i < topLevelEnd; i++) {
    if (/^\s*gpus\s*=/.test(lines[i])) {
      // the array may continue on the following lines until its closing bracket
      let end = i;
      let depth = 0;
      for (let j = i; j < topLevelEnd; j++) {
        const code = lines[j].replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/#.*$/, "");
        depth += (code.match(/\[/g) ?? []).length - (code.match(/\]/g) ?? []).length;
        end = j;
        if (depth <= 0) {
          break;
        }
      }
      lines.splice(i, end - i + 1, line);
      return lines.join("\n");
    }
  }
  if (firstTable < 0) {
    const body = existing.length === 0 || existing.endsWith("\n") ? existing : existing + "\n";
    return body + line + "\n";
  }
  lines.splice(firstTable, 0, line, "");
  return lines.join("\n");
}
