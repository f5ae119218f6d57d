-- :checkhealth perflsp - the interpreter, perflsp's version, the GPUs, the LLM advisor and
-- profiling, as the running server reports them. vim.health on 0.10+ (start/ok/warn/error/info),
-- vim.health.report_* on 0.8-0.9, the health#report_* functions on 0.7.
local M = {}

local function reporter()
  local h = vim.health
  if h and h.start then
    return h
  end
  if h and h.report_start then
    return { start = h.report_start, ok = h.report_ok, warn = h.report_warn, error = h.report_error, info = h.report_info }
  end
  local function fn(name)
    return function(msg, advice)
      if advice ~= nil then
        return vim.fn["health#report_" .. name](msg, advice)
      end
      return vim.fn["health#report_" .. name](msg)
    end
  end
  return { start = fn("start"), ok = fn("ok"), warn = fn("warn"), error = fn("error"), info = fn("info") }
end

--- The running perflsp client, and the interpreter it was started with (any configuration:
--- setup(), lsp/perflsp.lua, nvim-lspconfig).
local function running(perflsp)
  local client = perflsp.clients()[1]
  if client and client.config and type(client.config.cmd) == "table" then
    return client, client.config.cmd[1]
  end
  return client, nil
end

--- The interpreter perflsp would start with when none runs yet.
local function configured_python(perflsp)
  if vim.lsp.config and vim.lsp.is_enabled and vim.lsp.is_enabled("perflsp") then
    local cmd = (vim.lsp.config.perflsp or {}).cmd
    if type(cmd) == "table" and cmd[1] then
      return cmd[1], "vim.lsp.config('perflsp')"
    end
  end
  return perflsp.python(), "require('perflsp').setup({ python = ... })"
end

local function gpu_names(status)
  local out = {}
  for _, g in ipairs(status.gpus or {}) do
    if type(g) == "table" then
      table.insert(out, g.name and g.name ~= g.id and ("%s (%s)"):format(g.id, g.name) or g.id)
    else
      table.insert(out, tostring(g))
    end
  end
  return out
end

function M.check()
  local health = reporter()
  local perflsp = require("perflsp")
  local v = vim.version()
  health.start("perflsp: Neovim and the interpreter")
  health.info(("Neovim %d.%d.%d (perflsp supports 0.7+; 0.11+ can use lsp/perflsp.lua with vim.lsp.enable)"):format(v.major, v.minor, v.patch))
  local client, python = running(perflsp)
  local source = "the running server"
  if not python then
    python, source = configured_python(perflsp)
  end
  health.info(("Interpreter: %s (from %s)"):format(python, source))
  local problem, version = perflsp.check(python)
  if problem then
    health.error(problem, { "Install perflsp there: " .. (perflsp.install_command(python)
        or (python .. " -m pip install <a clone of the perflsp repository>")),
      "or point perflsp at a Python that has it (see editors/nvim/README.md)" })
  else
    health.ok(("perflsp %s is importable by %s"):format(version ~= "" and version or "(unknown version)", python))
  end

  health.start("perflsp: server")
  local status = perflsp.status or vim.g.perflsp_status
  if not client then
    health.warn("perflsp is not running in this session", { "Open a CUDA, C or C++ file (filetypes cuda, c, cpp) to start it" })
  else
    health.ok(("running (client %d, root %s)"):format(client.id, tostring(client.config.root_dir)))
  end
  if type(status) ~= "table" then
    if client then
      health.warn("no perflsp/status notification received yet")
    end
    return
  end
  if status.version then
    health.info(("server perflsp %s, engine %s"):format(status.version, tostring(status.engine)))
  end
  if status.enabled == false then
    health.warn("perflsp is switched off for this workspace (enable = false)")
  end
  local gpus = gpu_names(status)
  if #gpus > 0 then
    health.ok("GPUs: " .. table.concat(gpus, ", ") .. "  (change: :PerflspGpus)")
  else
    health.warn("no GPU selected", { ":PerflspGpus, or gpus = [...] in .perflsp.toml" })
  end
  health.info("Workspace trusted: " .. (status.trusted and "yes"
    or "no — the LLM endpoint and profiling commands count only from your own config (settings, init_options), "
    .. "never from the project's .perflsp.toml; trust a project with init_options = { workspaceTrusted = true }"))
  local llm = type(status.llm) == "table" and status.llm.state or status.llm or "off"
  local llm_line = ("LLM advisor: %s%s"):format(llm, status.llmReason and (" — " .. status.llmReason) or "")
  if llm == "failing" then
    health.warn(llm_line)
  elseif llm == "off" then
    health.info(llm_line)
  else
    health.ok(llm_line)
  end
  local profiling = status.profiling or "off"
  local profiling_line = ("Profiling (Nsight Compute): %s%s"):format(profiling, status.profilingReason and (" — " .. status.profilingReason) or "")
  if profiling == "ready" then
    health.ok(profiling_line)
  else
    health.info(profiling_line)
  end
  for _, problem_text in ipairs(status.configErrors or {}) do
    health.error("configuration: " .. tostring(problem_text))
  end
  for _, ignored in ipairs(status.ignoredSettings or {}) do
    health.warn("ignored setting: " .. tostring(ignored))
  end
end

return M
