-- How long perflsp's Lua takes per buffer open: opens 50 C/C++ buffers and prints the time spent in
-- perflsp's FileType autocommand bodies (require("perflsp").timing(), vim.loop.hrtime around each),
-- and the wall time of each `:edit` with and without perflsp for comparison.
--
--   PERFLSP_PYTHON=.venv/bin/python nvim --headless -n -i NONE -u editors/nvim/bench/buffer_open.lua
--
-- Environment: PERFLSP_PYTHON (the interpreter with perflsp; default python3), PERFLSP_BENCH_CONFIG
-- ("setup": require("perflsp").setup, 0.7+, the default; "native": lsp/perflsp.lua with
-- vim.lsp.enable, 0.11+; "none": no perflsp, the baseline), PERFLSP_BENCH_BUFFERS (default 50),
-- PERFLSP_BENCH_OUT (also write the figures as JSON there).
local here = debug.getinfo(1, "S").source:sub(2)
local plugin = vim.fn.fnamemodify(here, ":p:h:h")
local python = os.getenv("PERFLSP_PYTHON") or "python3"
local mode = os.getenv("PERFLSP_BENCH_CONFIG") or "setup"
local count = tonumber(os.getenv("PERFLSP_BENCH_BUFFERS") or "50")
local out_path = os.getenv("PERFLSP_BENCH_OUT")
local uv = vim.uv or vim.loop
local encode = (vim.json and vim.json.encode) or vim.fn.json_encode

local function finish(result)
  local v = vim.version()
  result.nvim = ("%d.%d.%d"):format(v.major, v.minor, v.patch)
  result.config = mode
  result.buffers = count
  if out_path then
    local f = io.open(out_path, "w")
    f:write(encode(result))
    f:close()
  end
  if result.error then
    io.stdout:write("error: " .. result.error .. "\n")
  elseif not result.perflsp_calls or result.perflsp_calls == 0 then -- no perflsp, or one without timing()
    io.stdout:write(("nvim %s, %s: %d C/C++ buffers; :edit wall time per buffer: %.3f ms; server attached to %d/%d "
      .. "buffers %.0f ms after the last :edit\n"):format(result.nvim, mode, count, result.edit_mean_ms,
      result.attached or 0, count, result.attach_wait_ms or 0))
  else
    io.stdout:write(("nvim %s, %s: %d C/C++ buffers; perflsp Lua per buffer open: %.3f ms on average "
      .. "(%d autocommand calls, total %.1f ms, longest %.3f ms, first %.3f ms)%s; :edit wall time per buffer: %.3f ms; "
      .. "server attached to %d/%d buffers %.0f ms after the last :edit\n"):format(
      result.nvim, mode, count, result.perflsp_per_buffer_ms, result.perflsp_calls, result.perflsp_total_ms,
      result.perflsp_max_ms, result.first_call_ms or 0,
      result.start_per_buffer_ms and (", then vim.lsp.start %.3f ms per buffer once the check answered"):format(result.start_per_buffer_ms) or "",
      result.edit_mean_ms, result.attached, count, result.attach_wait_ms))
  end
  vim.cmd("qa!")
end

vim.defer_fn(function()
  finish({ error = "watchdog: the benchmark did not finish in 110 s" })
end, 110000)

if mode ~= "none" then
  vim.opt.runtimepath:prepend(plugin) -- plugin/perflsp.lua loads after this file, as a plugin would
end
package.path = plugin .. "/lua/?.lua;" .. plugin .. "/lua/?/init.lua;" .. package.path
vim.cmd("filetype on")
local perflsp = require("perflsp")
if mode == "setup" then
  perflsp.setup({ python = python })
elseif mode == "native" then
  vim.cmd("runtime plugin/perflsp.lua") -- as a plugin manager would load it
  vim.lsp.config("perflsp", { cmd = { python, "-m", "perflsp", "serve" } })
  vim.lsp.enable("perflsp")
end

-- a project: .perflsp.toml at the root, 50 sources in a few folders
local dir = vim.fn.tempname()
vim.fn.mkdir(dir .. "/src/a", "p")
vim.fn.mkdir(dir .. "/src/b", "p")
local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end
write(dir .. "/.perflsp.toml", 'gpus = ["h100"]\n')
local files = {}
for i = 1, count do
  local ext = ({ "cpp", "c", "h", "hpp", "cc" })[(i - 1) % 5 + 1]
  local path = ("%s/src/%s/file%02d.%s"):format(dir, i % 2 == 0 and "a" or "b", i, ext)
  write(path, ("// file %d\nstatic int add%d(int a, int b) { return a + b; }\n"):format(i, i))
  table.insert(files, path)
end

local function clients_of(bufnr)
  local list = vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = bufnr }) or vim.lsp.buf_get_clients(bufnr)
  local out = {}
  for _, c in pairs(list) do
    if c.name == "perflsp" then
      table.insert(out, c)
    end
  end
  return out
end

local function run()
  local edit_ns = 0
  local buffers = {}
  for _, path in ipairs(files) do
    local t0 = uv.hrtime()
    vim.cmd("edit " .. vim.fn.fnameescape(path))
    edit_ns = edit_ns + (uv.hrtime() - t0)
    table.insert(buffers, vim.api.nvim_get_current_buf())
  end
  -- (an older perflsp without timing(): only the :edit wall times compare)
  local timing = perflsp.timing and perflsp.timing() or { mean_ms = 0, max_ms = 0, total_ms = 0, count = 0 }
  local result = {
    perflsp_per_buffer_ms = timing.total_ms / count,
    perflsp_mean_ms = timing.mean_ms,
    perflsp_max_ms = timing.max_ms,
    perflsp_total_ms = timing.total_ms,
    perflsp_calls = timing.count,
    edit_mean_ms = edit_ns / count / 1e6,
    filetypes = {},
  }
  for _, b in ipairs(buffers) do
    local ft = vim.bo[b].filetype
    result.filetypes[ft] = (result.filetypes[ft] or 0) + 1
  end
  -- the asynchronous part: the interpreter check and the server start, after the loop
  local t0 = uv.hrtime()
  local function attached()
    if mode == "none" then
      return 0
    end
    local n = 0
    for _, b in ipairs(buffers) do
      if #clients_of(b) > 0 then
        n = n + 1
      end
    end
    return n
  end
  vim.wait(60000, function()
    return mode == "none" or attached() == #buffers
  end, 20)
  result.attached = attached()
  result.attach_wait_ms = (uv.hrtime() - t0) / 1e6
  if perflsp.timing then
    local t = perflsp.timing()
    result.start_per_buffer_ms = t.starts > 0 and t.start_total_ms / t.starts or nil
    result.first_call_ms = t.first_ms
  end
  for _, c in ipairs(clients_of(buffers[1])) do
    if c.stop then
      pcall(function()
        if vim.fn.has("nvim-0.11") == 1 then
          c:stop(true)
        else
          c.stop(true)
        end
      end)
    end
  end
  vim.fn.delete(dir, "rf")
  finish(result)
end

vim.api.nvim_create_autocmd("VimEnter", {
  callback = function()
    vim.schedule(function()
      local ok, err = xpcall(run, debug.traceback)
      if not ok then
        finish({ error = tostring(err) })
      end
    end)
  end,
})
