-- Driven by test_nvim_e2e.py: `nvim --headless -n -i NONE -u nvim_e2e.lua FILE`.
-- Environment: PERFLSP_E2E_OUT (JSON results), PERFLSP_E2E_PYTHON, PERFLSP_E2E_PLUGIN (editors/nvim),
-- PERFLSP_E2E_CONFIG ("setup": require("perflsp").setup, works on 0.7+; "native": lsp/perflsp.lua
-- with vim.lsp.enable, 0.11+), PERFLSP_E2E_MODE ("full" or "error": only the startup message),
-- PERFLSP_E2E_FIX_FILE (file with a quick fix), PERFLSP_E2E_FIX_LINE (1-based line of the launch).
local out_path = os.getenv("PERFLSP_E2E_OUT")
local plugin = os.getenv("PERFLSP_E2E_PLUGIN")
local python = os.getenv("PERFLSP_E2E_PYTHON")
local config_kind = os.getenv("PERFLSP_E2E_CONFIG") or "setup"
local mode = os.getenv("PERFLSP_E2E_MODE") or "full"
local results = { version = tostring(vim.version().major) .. "." .. vim.version().minor .. "." .. vim.version().patch,
  config = config_kind, messages = {}, steps = {} }

local encode = (vim.json and vim.json.encode) or vim.fn.json_encode
local function finish(err)
  if err then
    results.error = tostring(err)
  end
  local f = io.open(out_path, "w")
  f:write(encode(results))
  f:close()
  vim.cmd("qa!")
end

-- Any uncaught error would hang headless nvim: a watchdog writes what we have and quits.
vim.defer_fn(function()
  finish("watchdog: the test did not finish in 100 s")
end, 100000)

local orig_notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(results.messages, { msg = msg, level = level })
  return orig_notify(msg, level, opts)
end

vim.opt.runtimepath:prepend(plugin)
package.path = plugin .. "/lua/?.lua;" .. plugin .. "/lua/?/init.lua;" .. package.path

local settings = { perflsp = { gpus = { "h100" } } }
if config_kind == "native" then
  vim.lsp.config("perflsp", { cmd = { python, "-m", "perflsp", "serve" }, settings = settings })
  vim.lsp.enable("perflsp")
else
  require("perflsp").setup({ python = python, settings = settings })
end

local function get_clients(bufnr)
  if vim.lsp.get_clients then
    return vim.lsp.get_clients({ bufnr = bufnr, name = "perflsp" })
  end
  local found = {}
  for _, c in pairs(vim.lsp.buf_get_clients(bufnr)) do
    if c.name == "perflsp" then
      table.insert(found, c)
    end
  end
  return found
end

local function perflsp_diagnostics(bufnr)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if d.source == "perflsp" or (d.user_data and d.user_data.lsp and d.user_data.lsp.source == "perflsp") then
      table.insert(out, d)
    end
  end
  return out
end

local function request(client, bufnr, method, params)
  local answer, err = client.request_sync(method, params, 20000, bufnr)
  if not answer then
    error(method .. " got no answer: " .. tostring(err))
  end
  if answer.err then
    error(method .. " failed: " .. vim.inspect(answer.err))
  end
  return answer.result
end

local function wait_diagnostics(bufnr, what)
  local ok = vim.wait(45000, function()
    return #perflsp_diagnostics(bufnr) > 0
  end, 50)
  if not ok then
    error("no perflsp diagnostics arrived for " .. what .. " in 45 s")
  end
  local list = {}
  for _, d in ipairs(perflsp_diagnostics(bufnr)) do
    local code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
    table.insert(list, { lnum = d.lnum, col = d.col, code = code, message = d.message, severity = d.severity })
  end
  return list
end

local function run()
  local bufnr = vim.api.nvim_get_current_buf()
  if mode == "error" then
    -- wait for an error from perflsp's own check (Neovim's own warnings may come first)
    vim.wait(15000, function()
      for _, m in ipairs(results.messages) do
        if m.level == vim.log.levels.ERROR and tostring(m.msg):find("perflsp", 1, true) then
          return true
        end
      end
      return false
    end, 50)
    results.attached = #get_clients(bufnr) > 0
    return
  end
  if not vim.wait(30000, function()
    return #get_clients(bufnr) > 0
  end, 50) then
    error("perflsp did not attach to " .. vim.api.nvim_buf_get_name(bufnr))
  end
  local client = get_clients(bufnr)[1]
  results.attached = true
  results.diagnostics = wait_diagnostics(bufnr, vim.api.nvim_buf_get_name(bufnr))
  table.insert(results.steps, "diagnostics")

  -- Hover on the kernel's name: where its roofline diagnostic starts.
  local hover_line, hover_col
  for _, d in ipairs(results.diagnostics) do
    if tostring(d.code):find("^roofline/") then
      hover_line, hover_col = d.lnum, d.col
      break
    end
  end
  if not hover_line then
    error("no roofline diagnostic to hover")
  end
  results.hover_position = { hover_line, hover_col }
  local hover = request(client, bufnr, "textDocument/hover", {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = { line = hover_line, character = hover_col },
  })
  local contents = hover and hover.contents
  results.hover = type(contents) == "table" and (contents.value or vim.inspect(contents)) or tostring(contents)
  table.insert(results.steps, "hover")

  -- :PerflspExplain on the kernel: the explanation lands in a Markdown buffer.
  vim.api.nvim_win_set_cursor(0, { hover_line + 1, hover_col })
  local explained
  require("perflsp").explain({ bufnr = bufnr, on_done = function(result, buf)
    explained = { result = result, lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false),
      filetype = vim.api.nvim_buf_get_option(buf, "filetype") }
  end })
  if not vim.wait(30000, function() return explained ~= nil end, 50) then
    error(":PerflspExplain gave no explanation in 30 s")
  end
  results.explanation = { text = table.concat(explained.lines, "\n"), filetype = explained.filetype,
    source = explained.result.source }
  vim.cmd("close")
  vim.api.nvim_set_current_buf(bufnr)
  table.insert(results.steps, "explain")

  -- A quick fix at a launch site of the lint example.
  local fix_file = os.getenv("PERFLSP_E2E_FIX_FILE")
  local fix_line = tonumber(os.getenv("PERFLSP_E2E_FIX_LINE")) - 1
  vim.cmd("edit " .. vim.fn.fnameescape(fix_file))
  local fbuf = vim.api.nvim_get_current_buf()
  if not vim.wait(30000, function()
    return #get_clients(fbuf) > 0
  end, 50) then
    error("perflsp did not attach to " .. fix_file)
  end
  local fclient = get_clients(fbuf)[1]
  results.fix_diagnostics = wait_diagnostics(fbuf, fix_file)
  local at_line = {}
  for _, d in ipairs(vim.diagnostic.get(fbuf, { lnum = fix_line })) do
    -- rebuild the LSP diagnostic (0.7 keeps only code/codeDescription/data in user_data.lsp)
    local lsp_d = {
      range = { start = { line = d.lnum, character = d.col }, ["end"] = { line = d.end_lnum, character = d.end_col } },
      message = d.message, severity = d.severity, code = d.code, source = d.source,
    }
    for k, v in pairs((d.user_data and d.user_data.lsp) or {}) do
      lsp_d[k] = v
    end
    table.insert(at_line, lsp_d)
  end
  local text = vim.api.nvim_buf_get_lines(fbuf, fix_line, fix_line + 1, false)[1]
  results.line_before = text
  results.context_diagnostics = at_line
  local actions = request(fclient, fbuf, "textDocument/codeAction", {
    textDocument = { uri = vim.uri_from_bufnr(fbuf) },
    range = { start = { line = fix_line, character = 0 }, ["end"] = { line = fix_line, character = #text } },
    context = { diagnostics = at_line },
  }) or {}
  results.actions = {}
  local chosen
  for _, a in ipairs(actions) do
    table.insert(results.actions, { title = a.title, kind = a.kind, edit = a.edit ~= nil })
  end
  -- a quick fix that edits the launch, else any action with an edit
  for _, a in ipairs(actions) do
    if a.edit and a.kind == "quickfix" and not chosen then
      chosen = a
    end
  end
  for _, a in ipairs(actions) do
    if a.edit and not chosen then
      chosen = a
    end
  end
  if not chosen then
    error("no code action with an edit at line " .. (fix_line + 1) .. "; actions: " .. vim.inspect(results.actions))
  end
  results.applied = { title = chosen.title, kind = chosen.kind }
  if chosen.edit then
    vim.lsp.util.apply_workspace_edit(chosen.edit, fclient.offset_encoding or "utf-16")
  end
  if chosen.command and type(chosen.command) == "table" then
    request(fclient, fbuf, "workspace/executeCommand", chosen.command)
  end
  vim.wait(5000, function()
    return vim.api.nvim_buf_get_lines(fbuf, fix_line, fix_line + 1, false)[1] ~= text
  end, 50)
  results.buffer_after = vim.api.nvim_buf_get_lines(fbuf, 0, -1, false)
  results.line_after = results.buffer_after[fix_line + 1]
  table.insert(results.steps, "code action")

  -- :PerflspGpus with a list: two GPUs at once
  local perflsp = require("perflsp")
  local function status_ids()
    local s = vim.g.perflsp_status
    local ids = {}
    for _, g in ipairs((type(s) == "table" and s.gpus) or {}) do
      table.insert(ids, g.id)
    end
    return table.concat(ids, ",")
  end
  vim.cmd("PerflspGpus h100,l40s")
  vim.wait(20000, function()
    return status_ids() == "h100-sxm5-80gb,l40s"
  end, 50)
  results.status_after_list = status_ids()
  table.insert(results.steps, "gpus from a list")

  -- :PerflspGpus picker with a scripted vim.ui.select: untick l40s, tick the RTX 3080, then Done
  local script = { "l40s", "rtx-3080-10gb", "done" }
  results.picker_prompts = {}
  vim.ui.select = function(items, opts, on_choice)
    local want = table.remove(script, 1)
    table.insert(results.picker_prompts, opts.format_item(items[1]))
    for _, item in ipairs(items) do
      if item.id == "l40s" and not results.gpu_l40s_label then -- as the picker first shows it
        results.gpu_l40s_label = opts.format_item(item)
      end
    end
    results.gpu_choices = #items - 1
    results.gpu_item_example = opts.format_item(items[2])
    for _, item in ipairs(items) do
      if (want == "done" and item.done) or (want ~= "done" and item.id == want) then
        return on_choice(item)
      end
    end
    on_choice(nil)
  end
  vim.cmd("PerflspGpus")
  vim.wait(20000, function()
    return status_ids() == "h100-sxm5-80gb,rtx-3080-10gb"
  end, 50)
  results.status_after_gpus = vim.g.perflsp_status
  results.statusline = perflsp.statusline()
  table.insert(results.steps, "gpus")

  -- :checkhealth perflsp: what the report buffer says
  vim.cmd("checkhealth perflsp")
  vim.wait(5000, function()
    return #table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n") > 200
  end, 50)
  results.health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
  table.insert(results.steps, "health")
end

vim.api.nvim_create_autocmd("VimEnter", {
  callback = function()
    vim.schedule(function()
      local ok, err = xpcall(run, debug.traceback)
      finish(not ok and err or nil)
    end)
  end,
})
