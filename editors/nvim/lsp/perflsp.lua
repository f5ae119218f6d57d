-- Neovim 0.11+ native configuration: put editors/nvim on 'runtimepath' (or copy this file to
-- ~/.config/nvim/lsp/perflsp.lua) and call vim.lsp.enable("perflsp").
-- Override fields with vim.lsp.config("perflsp", { cmd = { "/path/to/python", "-m", "perflsp", "serve" } }).
local cmd_in_use

local function explain_exit(code)
  -- The server process ended at once: say why in words (wrong interpreter, perflsp missing).
  local python = cmd_in_use and cmd_in_use[1]
  if code == 0 or not python then
    return
  end
  local cmd = table.concat(cmd_in_use, " ")
  vim.schedule(function() -- on_exit runs in a fast event: no Vimscript functions there
    local ok, perflsp = pcall(require, "perflsp")
    if not ok then
      vim.notify(("perflsp: the server (%s) exited with code %d; see :LspLog"):format(cmd, code), vim.log.levels.ERROR)
      return
    end
    perflsp.check_async(python, function(message) -- in the background: the UI never waits for it
      message = message or ("perflsp: the server (%s) exited with code %d; see :LspLog and :checkhealth perflsp"):format(cmd, code)
      vim.notify(message, vim.log.levels.ERROR, { title = "perflsp" })
    end)
  end)
end

return {
  cmd = { "python3", "-m", "perflsp", "serve" },
  filetypes = { "cuda", "c", "cpp" },
  root_markers = { ".perflsp.toml", "compile_commands.json", ".git" },
  settings = { perflsp = {} },
  handlers = {
    -- this file also works copied alone to ~/.config/nvim/lsp/: the plugin's module is optional
    ["perflsp/status"] = function(err, result, ...)
      local ok, perflsp = pcall(require, "perflsp")
      if ok then
        perflsp.on_status(err, result, ...)
      else
        vim.g.perflsp_status = result
      end
    end,
    ["perflsp/explanation"] = function(...)
      local ok, perflsp = pcall(require, "perflsp")
      if ok then
        perflsp.on_explanation(...)
      end
    end,
  },
  before_init = function(_, config)
    cmd_in_use = config.cmd
  end,
  on_exit = explain_exit,
}
