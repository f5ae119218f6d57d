-- perflsp for Neovim 0.7+: starts `python -m perflsp serve` for CUDA/C/C++ buffers.
--
--   require("perflsp").setup({ python = "~/venvs/perf/bin/python", settings = { perflsp = { gpus = { "h100" } } } })
--
-- On 0.11+ you can instead use the `lsp/perflsp.lua` config with vim.lsp.enable("perflsp"), or
-- nvim-lspconfig (see editors/nvim/README.md). This module works on 0.7 through 0.11+.
--
-- Nothing here blocks the UI: the interpreter is checked once per interpreter in the background
-- (vim.system on 0.10+, a job before), buffers opened meanwhile attach when the answer comes, and
-- every request to the server is asynchronous. `:checkhealth perflsp` reports the whole setup.
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
M.status = nil -- last `perflsp/status` notification: { gpus = {...}, llm = "off"|"ready"|"busy"|"failing", ... }

local has_011 = vim.fn.has("nvim-0.11") == 1
local uv = vim.uv or vim.loop

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

local function missing_interpreter(python)
  return ("perflsp: the Python interpreter '%s' was not found or is not executable. "
    .. "Set it with require('perflsp').setup({ python = '/path/to/python' }) (a Python 3.11+ with perflsp installed)."):format(python)
end

--- The perflsp checkout this plugin is part of (editors/nvim/lua/perflsp/init.lua lies in it), or
--- nil when the plugin was copied elsewhere.
function M.checkout()
  local here = debug.getinfo(1, "S").source
  if here:sub(1, 1) ~= "@" then
    return nil
  end
  local root = vim.fn.fnamemodify(here:sub(2), ":p:h:h:h:h:h")
  local ok, lines = pcall(vim.fn.readfile, root .. "/pyproject.toml")
  if not ok then
    return nil
  end
  for _, line in ipairs(lines) do
    if line:match('^name%s*=%s*"perflsp"') then
      return root
    end
  end
  return nil
end

--- `word` as one shell word (quoted only when it needs to be).
local function shell_word(word)
  if word:match("^[%w@%%+=:,./_-]+$") then
    return word
  end
  return vim.fn.shellescape(word)
end

--- The shell command that installs perflsp into `python`: perflsp is not on PyPI, so it is
--- installed from the checkout this plugin comes from (nil when that is not known).
function M.install_command(python)
  local root = M.checkout()
  if not root then
    return nil
  end
  return ("%s -m pip install %s"):format(shell_word(python), shell_word(root))
end

local function install_hint(python)
  return M.install_command(python)
    or ("%s -m pip install <a clone of the perflsp repository> (see its README)"):format(python)
end

--- The message for a failed `python -c "import perflsp"` (exit code and its output).
local function import_problem(python, output)
  if output:find("No module named 'perflsp'", 1, true) then
    return ("perflsp is not installed in %s. Install it with: %s"):format(python, install_hint(python))
  end
  local last = vim.trim(output):match("[^\n]*$") or output
  return ("perflsp: '%s -c \"import perflsp\"' failed: %s"):format(python, last)
end

local PROBE = { "-c", "import sys, perflsp; sys.stdout.write(perflsp.__version__)" }

--- Runs argv in the background; `on_done(code, stdout, stderr)` runs on the main loop.
local function run_async(argv, on_done)
  if vim.system then -- 0.10+
    local ok, err = pcall(vim.system, argv, { text = true }, function(out)
      vim.schedule(function()
        on_done(out.code, out.stdout or "", out.stderr or "")
      end)
    end)
    if not ok then
      vim.schedule(function()
        on_done(-1, "", tostring(err))
      end)
    end
    return
  end
  local stdout, stderr = {}, {}
  local job = vim.fn.jobstart(argv, {
    stdout_buffered = true,
    stderr_buffered = true,
    on_stdout = function(_, data)
      stdout = data or {}
    end,
    on_stderr = function(_, data)
      stderr = data or {}
    end,
    on_exit = function(_, code)
      on_done(code, table.concat(stdout, "\n"), table.concat(stderr, "\n"))
    end,
  })
  if job <= 0 then
    vim.schedule(function()
      on_done(-1, "", "cannot run " .. argv[1])
    end)
  end
end

local checks = {} -- python -> { state = "pending"|"ok"|"failed", message?, version?, waiting = {callbacks} }

--- Checks in the background that `python -m perflsp` can run, once per interpreter; calls
--- `callback(problem, version)` on the main loop: problem is nil when it can, else a message that
--- says how to fix it. Never blocks.
function M.check_async(python, callback)
  local entry = checks[python]
  if entry and entry.state ~= "pending" then
    callback(entry.message, entry.version)
    return
  end
  if entry then
    table.insert(entry.waiting, callback)
    return
  end
  entry = { state = "pending", waiting = { callback } }
  checks[python] = entry
  local function done(message, version)
    entry.state = message and "failed" or "ok"
    entry.message, entry.version = message, version
    local waiting = entry.waiting
    entry.waiting = {}
    for _, cb in ipairs(waiting) do
      cb(message, version)
    end
  end
  if vim.fn.executable(python) ~= 1 then
    vim.schedule(function()
      done(missing_interpreter(python))
    end)
    return
  end
  run_async({ python, PROBE[1], PROBE[2] }, function(code, stdout, stderr)
    if code == 0 then
      done(nil, vim.trim(stdout))
    else
      done(import_problem(python, stderr ~= "" and stderr or stdout))
    end
  end)
end

--- Forget the cached interpreter checks (after installing perflsp, say).
function M.reset_checks()
  checks = {}
end

--- Blocking variant (`:checkhealth` only): nil when `python -m perflsp` can run, else the message.
--- The second value is perflsp's version.
function M.check(python)
  if vim.fn.executable(python) ~= 1 then
    return missing_interpreter(python)
  end
  local code, out
  if vim.system then
    local result = vim.system({ python, PROBE[1], PROBE[2] }, { text = true }):wait(20000)
    code, out = result.code, (result.code == 0 and result.stdout or ((result.stderr or "") .. (result.stdout or "")))
  else
    out = vim.fn.system({ python, PROBE[1], PROBE[2] })
    code = vim.v.shell_error
  end
  if code ~= 0 then
    return import_problem(python, out or "")
  end
  return nil, vim.trim(out or "")
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
      return (vim.fn.fnamemodify(found, ":p:h"):gsub("/%.git/?$", ""))
    end
  end
  return dir
end

--- perflsp clients (of `bufnr` when given), on every version from 0.7.
function M.clients(bufnr)
  if vim.lsp.get_clients then -- 0.10+
    return vim.lsp.get_clients({ name = "perflsp", bufnr = bufnr })
  end
  local found = {}
  for _, client in pairs(vim.lsp.get_active_clients()) do
    if client.name == "perflsp" and (bufnr == nil or vim.lsp.buf_is_attached(bufnr, client.id)) then
      table.insert(found, client)
    end
  end
  return found
end

--- client:request on 0.11+ (the dot form is deprecated there), client.request before.
local function client_request(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function set_lines(buf, markdown)
  if buf and vim.api.nvim_buf_is_valid(buf) then
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(markdown, "\n", { plain = true }))
    vim.bo[buf].modifiable = false
  end
end

local stream = nil -- the explanation being streamed: { id, buf }

--- `perflsp/explanation`: the Markdown of a streamed explanation so far.
function M.on_explanation(_, result)
  if type(result) == "table" and stream and result.id == stream.id then
    set_lines(stream.buf, result.markdown or "")
  end
end

--- `perflsp/status`: kept for the statusline, `:PerflspStatus` and `:checkhealth perflsp`.
function M.on_status(_, result)
  M.status = result
  vim.g.perflsp_status = result
  pcall(vim.api.nvim_exec_autocmds, "User", { pattern = "PerflspStatus", modeline = false })
end

M.handlers = {
  ["perflsp/status"] = function(...)
    M.on_status(...)
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

-- Time spent in perflsp's Lua per buffer open (the FileType autocommand bodies, and later the
-- vim.lsp.start that attaches the buffer), for the figure in editors/README.md:
-- `require("perflsp").timing()`.
local timing = { count = 0, total_ns = 0, max_ns = 0, first_ns = nil, start_ns = 0, starts = 0 }

local clients = {} -- root_dir -> client id (0.7 has no vim.lsp.start to reuse clients)
local reported = {}

local function start(bufnr, config)
  if not vim.api.nvim_buf_is_valid(bufnr) then
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

--- Starts (or reuses) the server for a buffer once its interpreter is known to work; the check
--- runs in the background the first time, so this returns at once. `on_started(client_id)` is
--- called when the buffer is attached (never when the interpreter cannot run perflsp: then one
--- error message says why).
function M.attach(bufnr, on_started)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local config = M.client_config(bufnr)
  M.check_async(config.cmd[1], function(problem)
    if problem then
      if not reported[problem] then
        reported[problem] = true
        notify(problem, vim.log.levels.ERROR)
      end
      return
    end
    local t0 = uv.hrtime()
    local id = start(bufnr, config)
    timing.start_ns = timing.start_ns + (uv.hrtime() - t0)
    timing.starts = timing.starts + 1
    if on_started and id then
      on_started(id)
    end
  end)
end

function M.timing()
  return {
    count = timing.count,
    total_ms = timing.total_ns / 1e6,
    mean_ms = timing.count > 0 and timing.total_ns / timing.count / 1e6 or 0,
    max_ms = timing.max_ns / 1e6,
    first_ms = (timing.first_ns or 0) / 1e6,
    starts = timing.starts,
    start_total_ms = timing.start_ns / 1e6,
  }
end

--- Wraps an autocommand body so that its time counts in M.timing().
function M.timed(fn)
  return function(...)
    local t0 = uv.hrtime()
    local result = fn(...)
    local dt = uv.hrtime() - t0
    timing.count = timing.count + 1
    timing.first_ns = timing.first_ns or dt
    timing.total_ns = timing.total_ns + dt
    if dt > timing.max_ns then
      timing.max_ns = dt
    end
    return result
  end
end

local function buffer_client(bufnr)
  return M.clients(bufnr)[1]
end

local function execute(client, bufnr, command, arg, callback)
  client_request(client, "workspace/executeCommand", { command = command, arguments = { arg } }, function(err, result)
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
      local start_line = kernel.range.start.line
      if start_line <= line and (not best or start_line > best.range.start.line) then
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
    vim.bo[buf].filetype = "markdown"
    vim.bo[buf].bufhidden = "wipe"
    set_lines(buf, "# " .. best.name .. "\n\n*Waiting for the explanation…*")
    vim.cmd("botright split")
    vim.api.nvim_win_set_buf(0, buf)
    stream = { id = "nvim-" .. stream_count, buf = buf }
    execute(client, bufnr, "perflsp.explainKernel", { uri = uri, kernel = best.name, quiet = true, streamId = stream.id },
      function(result)
        set_lines(buf, "# " .. best.name .. "\n\n" .. ((result and result.markdown) or ""))
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

local gpu_ids = {} -- ids from the last listGpus answer: completion of :PerflspGpus

local function gpu_label(g)
  local bw = g.memory_bandwidth_gbs or g.memoryBandwidthGbs
  local fp32 = (g.peaks_tflops or g.peaksTflops or {}).fp32
  return ("%s (%s)%s%s"):format(g.name or g.id, g.id,
    fp32 and (" · FP32 %.1f TFLOP/s"):format(fp32) or "", bw and (" · %d GB/s"):format(bw) or "")
end

--- Sets the session's GPUs (above settings and .perflsp.toml, as VS Code's picker does).
function M.set_gpus(ids, on_done)
  local client = M.clients()[1]
  if not client then
    notify("perflsp is not running: open a CUDA, C or C++ file first", vim.log.levels.WARN)
    return
  end
  execute(client, nil, "perflsp.setGpus", { gpus = ids }, function(result)
    local now = (result and result.gpus) or ids
    notify("perflsp: GPUs " .. table.concat(now, ", "))
    if on_done then
      on_done(now)
    end
  end)
end

--- :PerflspGpus - choose one or several GPUs from the server's database: pick a GPU to tick or
--- untick it, then "Done" (vim.ui.select, asked again after each pick). `:PerflspGpus h100,l40s`
--- (commas or spaces) sets them directly.
function M.select_gpus(opts)
  opts = opts or {}
  local client = M.clients()[1]
  if not client then
    notify("perflsp is not running: open a CUDA, C or C++ file first", vim.log.levels.WARN)
    return
  end
  execute(client, nil, "perflsp.listGpus", vim.empty_dict and vim.empty_dict() or {}, function(answer)
    local gpus = type(answer) == "table" and (answer.gpus or answer) or {}
    if type(gpus) ~= "table" or #gpus == 0 then
      notify("perflsp: the server listed no GPUs", vim.log.levels.WARN)
      return
    end
    gpu_ids = {}
    local chosen, order = {}, {}
    for _, g in ipairs(gpus) do
      table.insert(gpu_ids, g.id)
      if g.selected then
        chosen[g.id] = true
        table.insert(order, g.id)
      end
    end
    local done_item = { done = true }
    local function pick()
      local items = { done_item }
      for _, g in ipairs(gpus) do
        table.insert(items, g)
      end
      vim.ui.select(items, {
        prompt = "perflsp GPUs: pick to tick/untick, then Done",
        format_item = function(item)
          if item.done then
            return ("Done: classify on %s"):format(#order > 0 and table.concat(order, ", ") or "(none ticked)")
          end
          return ("[%s] %s"):format(chosen[item.id] and "x" or " ", gpu_label(item))
        end,
      }, function(choice)
        if not choice then
          return -- cancelled: nothing changes
        end
        if choice.done then
          if #order == 0 then
            notify("perflsp: tick at least one GPU", vim.log.levels.WARN)
            vim.schedule(pick)
            return
          end
          M.set_gpus(order, opts.on_done)
          return
        end
        if chosen[choice.id] then
          chosen[choice.id] = nil
          for i, id in ipairs(order) do
            if id == choice.id then
              table.remove(order, i)
              break
            end
          end
        else
          chosen[choice.id] = true
          table.insert(order, choice.id)
        end
        vim.schedule(pick) -- after this picker has closed
      end)
    end
    pick()
  end)
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
  local group = vim.api.nvim_create_augroup("perflsp", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = M.config.filetypes,
    callback = M.timed(function(args)
      M.attach(args.buf)
    end),
  })
  M.create_commands()
end

--- :PerflspGpus, :PerflspStatus, :PerflspExplain, :PerflspImportProfile (plugin/perflsp.lua calls
--- this; setup() too).
function M.create_commands()
  vim.api.nvim_create_user_command("PerflspGpus", function(args)
    local ids = {}
    for id in (args.args or ""):gmatch("[^,%s]+") do
      table.insert(ids, id)
    end
    if #ids > 0 then
      M.set_gpus(ids)
    else
      M.select_gpus()
    end
  end, {
    nargs = "*",
    complete = function(lead)
      local prefix, last = lead:match("^(.*[,%s])([^,%s]*)$")
      prefix, last = prefix or "", last or lead
      local out = {}
      for _, id in ipairs(gpu_ids) do
        if id:sub(1, #last) == last then
          table.insert(out, prefix .. id)
        end
      end
      return out
    end,
    desc = "perflsp: choose the GPUs (several: tick them, or :PerflspGpus h100,l40s)",
  })
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
