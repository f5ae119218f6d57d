-- perflsp for Neovim 0.7+: starts `python -m perflsp serve` for CUDA/C/C++ buffers.
--
--   require("perflsp").setup({ python = "~/venvs/perf/bin/python", settings = { perflsp = { gpus = { "h100" } } } })
--
-- On 0.11+ you can instead use the `lsp/perflsp.lua` config with vim.lsp.enable("perflsp"), or
-- nvim-lspconfig (see editors/nvim/README.md). This module works on 0.7 through 0.11+.
local M = {}

M.filetypes = { "cuda", "c", "cpp" }
M.root_markers = { ".perflsp.toml", "compile_commands.json", ".git" }

local defaults = {
  python = nil, -- interpreter; default: $VIRTUAL_ENV/bin/python, else python3
  settings = { perflsp = {} }, -- answered to the server's workspace/configuration requests
  init_options = {},
  filetypes = M.filetypes,
  on_attach = nil,
}

M.config = vim.deepcopy(defaults)
M.status = nil -- last `perflsp/status` notification: { gpus = {...}, llm = "off"|"ready"|"busy"|"failing" }

local function notify(msg, level)
  vim.notify(msg, level or vim.log.levels.INFO, { title = "perflsp" })
end

--- The interpreter to run the server with.
function M.python()
  if M.config.python and M.config.python ~= "" then
    return vim.fn.expand(M.config.python)
  end
  local venv = os.getenv("VIRTUAL_ENV")
  if venv and vim.fn.executable(venv .. "/bin/python") == 1 then
    return venv .. "/bin/python"
  end
  return "python3"
end

--- nil when `python -m perflsp` can run, else a message that says how to fix it.
function M.check(python)
  if vim.fn.executable(python) ~= 1 then
    return ("perflsp: the Python interpreter '%s' was not found or is not executable. "
      .. "Set it with require('perflsp').setup({ python = '/path/to/python' }) (a Python 3.11+ with perflsp installed)."):format(python)
  end
  local out = vim.fn.system({ python, "-c", "import perflsp" })
  if vim.v.shell_error ~= 0 then
    if out:find("No module named 'perflsp'", 1, true) then
      return ("perflsp is not installed in %s. Install it with: %s -m pip install perflsp"):format(python, python)
    end
    local last = vim.trim(out):match("[^\n]*$") or out
    return ("perflsp: '%s -c \"import perflsp\"' failed: %s"):format(python, last)
  end
  return nil
end

function M.cmd(python)
  return { python or M.python(), "-m", "perflsp", "serve" }
end

local function root_dir(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  local dir = vim.fn.fnamemodify(name, ":p:h")
  for _, marker in ipairs(M.root_markers) do
    local found = vim.fn.findfile(marker, dir .. ";")
    if found == "" then
      found = vim.fn.finddir(marker, dir .. ";")
    end
    if found ~= "" then
      return vim.fn.fnamemodify(found, ":p:h"):gsub("/%.git/?$", "")
    end
  end
  return dir
end

M.handlers = {
  ["perflsp/status"] = function(_, result)
    M.status = result
    vim.g.perflsp_status = result
    pcall(vim.api.nvim_exec_autocmds, "User", { pattern = "PerflspStatus", modeline = false })
  end,
}

--- For a statusline: "h100 · LLM ready".
function M.statusline()
  local s = M.status or vim.g.perflsp_status -- the native lsp/perflsp.lua config sets the latter
  if type(s) ~= "table" then
    return ""
  end
  local ids = {}
  for _, g in ipairs(s.gpus or {}) do
    table.insert(ids, type(g) == "table" and (g.id or g.name) or tostring(g))
  end
  local llm = type(s.llm) == "table" and s.llm.state or s.llm
  return table.concat(ids, ", ") .. ((llm and llm ~= "off") and (" · LLM " .. llm) or "")
end

--- The client configuration for vim.lsp.start / start_client.
function M.client_config(bufnr)
  local python = M.python()
  return {
    name = "perflsp",
    cmd = M.cmd(python),
    root_dir = root_dir(bufnr or 0),
    settings = M.config.settings,
    init_options = M.config.init_options,
    handlers = M.handlers,
    on_attach = M.config.on_attach,
  }
end

local clients = {} -- root_dir -> client id (0.7 has no vim.lsp.start to reuse clients)
local reported = {}

--- Starts (or reuses) the server for a buffer. Returns the client id, or nil with a message shown.
function M.attach(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local config = M.client_config(bufnr)
  local python = config.cmd[1]
  local problem = M.check(python)
  if problem then
    if not reported[problem] then
      reported[problem] = true
      notify(problem, vim.log.levels.ERROR)
    end
    return nil
  end
  if vim.lsp.start then -- 0.8+
    return vim.lsp.start(config, { bufnr = bufnr })
  end
  local id = clients[config.root_dir]
  if not id or not vim.lsp.get_client_by_id(id) then
    id = vim.lsp.start_client(config)
    clients[config.root_dir] = id
  end
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

local function server_command(command, arg)
  local list = vim.lsp.get_clients and vim.lsp.get_clients() or vim.lsp.get_active_clients()
  for _, client in pairs(list) do
    if client.name == "perflsp" then
      -- every perflsp command takes one JSON object argument
      local answer = client.request_sync("workspace/executeCommand", { command = command, arguments = { arg } }, 10000, 0)
      if answer and answer.err then
        notify(("perflsp: %s failed: %s"):format(command, answer.err.message or vim.inspect(answer.err)), vim.log.levels.ERROR)
        return nil
      end
      return answer
    end
  end
  notify("perflsp is not running", vim.log.levels.WARN)
end

--- :PerflspGpus - choose the GPU from the server's database (for this session).
function M.select_gpus()
  local answer = server_command("perflsp.listGpus", vim.empty_dict and vim.empty_dict() or {})
  local gpus = answer and answer.result
  if type(gpus) == "table" and gpus.gpus then
    gpus = gpus.gpus
  end
  if type(gpus) ~= "table" or #gpus == 0 then
    notify("perflsp: the server listed no GPUs", vim.log.levels.WARN)
    return
  end
  vim.ui.select(gpus, {
    prompt = "perflsp GPU",
    format_item = function(g)
      local bw = g.memory_bandwidth_gbs or g.memoryBandwidthGbs
      local fp32 = (g.peaks_tflops or g.peaksTflops or {}).fp32
      return ("%s (%s)%s%s%s"):format(g.name or g.id, g.id, g.selected and " [selected]" or "",
        fp32 and (" · FP32 %.1f TFLOP/s"):format(fp32) or "", bw and (" · %d GB/s"):format(bw) or "")
    end,
  }, function(choice)
    if choice then
      server_command("perflsp.setGpus", { gpus = { choice.id } })
    end
  end)
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
  local group = vim.api.nvim_create_augroup("perflsp", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = M.config.filetypes,
    callback = function(args)
      M.attach(args.buf)
    end,
  })
  M.create_commands()
end

--- :PerflspGpus and :PerflspStatus (plugin/perflsp.lua calls this; setup() too).
function M.create_commands()
  vim.api.nvim_create_user_command("PerflspGpus", M.select_gpus, { desc = "perflsp: choose the GPU" })
  vim.api.nvim_create_user_command("PerflspStatus", function()
    notify(M.statusline() ~= "" and M.statusline() or "no status yet")
  end, { desc = "perflsp: GPUs and LLM state" })
end

return M
