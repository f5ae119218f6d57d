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

local stream = nil -- the explanation being streamed: { id, buf }

local function show_markdown(buf, markdown)
  if buf and vim.api.nvim_buf_is_valid(buf) then
    vim.api.nvim_buf_set_option(buf, "modifiable", true)
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(markdown, "\n", { plain = true }))
    vim.api.nvim_buf_set_option(buf, "modifiable", false)
  end
end

--- `perflsp/explanation`: the Markdown of a streamed explanation so far.
function M.on_explanation(_, result)
  if type(result) == "table" and stream and result.id == stream.id then
    show_markdown(stream.buf, result.markdown or "")
  end
end

M.handlers = {
  ["perflsp/status"] = function(_, result)
    M.status = result
    vim.g.perflsp_status = result
    pcall(vim.api.nvim_exec_autocmds, "User", { pattern = "PerflspStatus", modeline = false })
  end,
  ["perflsp/explanation"] = function(...)
    M.on_explanation(...)
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

local function buffer_client(bufnr)
  local list = vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = bufnr }) or vim.lsp.buf_get_clients(bufnr)
  for _, client in pairs(list) do
    if client.name == "perflsp" then
      return client
    end
  end
end

local function execute(client, bufnr, command, arg, callback)
  client.request("workspace/executeCommand", { command = command, arguments = { arg } }, function(err, result)
    if err then
      notify(("perflsp: %s failed: %s"):format(command, err.message or vim.inspect(err)), vim.log.levels.ERROR)
      return
    end
    callback(result)
  end, bufnr)
end

local stream_count = 0

--- :PerflspExplain - the kernel under the cursor (or the nearest above it), explained in a
--- Markdown scratch buffer: the LLM's explanation as it streams in when the advisor is on, else
--- the static engine's. `opts.on_done(result)` gets the server's answer.
function M.explain(opts)
  opts = opts or {}
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  local client = buffer_client(bufnr)
  if not client then
    notify("perflsp is not attached to this buffer", vim.log.levels.WARN)
    return
  end
  local uri = vim.uri_from_bufnr(bufnr)
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  execute(client, bufnr, "perflsp.rooflineData", { scope = "open", uri = uri }, function(data)
    local best
    for _, kernel in ipairs((data and data.kernels) or {}) do
      local start = kernel.range.start.line
      if start <= line and (not best or start > best.range.start.line) then
        best = kernel
      end
    end
    best = best or (data and data.kernels and data.kernels[1])
    if not best then
      notify("perflsp: no kernel in this buffer")
      return
    end
    stream_count = stream_count + 1
    local buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, ("perflsp://explain/%s/%d"):format(best.name, stream_count))
    vim.api.nvim_buf_set_option(buf, "filetype", "markdown")
    vim.api.nvim_buf_set_option(buf, "bufhidden", "wipe")
    show_markdown(buf, "# " .. best.name .. "\n\n*Waiting for the explanation…*")
    vim.cmd("botright split")
    vim.api.nvim_win_set_buf(0, buf)
    stream = { id = "nvim-" .. stream_count, buf = buf }
    execute(client, bufnr, "perflsp.explainKernel", { uri = uri, kernel = best.name, quiet = true, streamId = stream.id },
      function(result)
        show_markdown(buf, "# " .. best.name .. "\n\n" .. ((result and result.markdown) or ""))
        stream = nil
        if opts.on_done then
          opts.on_done(result, buf)
        end
      end)
  end)
end

--- :PerflspImportProfile REPORT - Nsight Compute results (.ncu-rep or CSV) into the workspace.
function M.import_profile(path)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = buffer_client(bufnr)
  if not client then
    notify("perflsp is not attached to this buffer", vim.log.levels.WARN)
    return
  end
  execute(client, bufnr, "perflsp.importProfile", { path = vim.fn.fnamemodify(path, ":p"), quiet = true }, function(result)
    notify("perflsp: " .. ((result and result.message) or "imported"))
  end)
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

--- :PerflspGpus, :PerflspStatus, :PerflspExplain, :PerflspImportProfile (plugin/perflsp.lua calls
--- this; setup() too).
function M.create_commands()
  vim.api.nvim_create_user_command("PerflspGpus", M.select_gpus, { desc = "perflsp: choose the GPU" })
  vim.api.nvim_create_user_command("PerflspStatus", function()
    notify(M.statusline() ~= "" and M.statusline() or "no status yet")
  end, { desc = "perflsp: GPUs and LLM state" })
  vim.api.nvim_create_user_command("PerflspExplain", function()
    M.explain()
  end, { desc = "perflsp: explain the kernel under the cursor" })
  vim.api.nvim_create_user_command("PerflspImportProfile", function(args)
    M.import_profile(args.args)
  end, { nargs = 1, complete = "file", desc = "perflsp: import Nsight Compute results" })
end

return M
