-- :PerflspGpus, :PerflspStatus, :PerflspExplain, :PerflspImportProfile for every setup; on Neovim
-- 0.11+, where perflsp is started by vim.lsp.enable("perflsp") with lsp/perflsp.lua, Neovim only
-- writes a wrong interpreter path to its LSP log: say it where the user looks. Loading this file
-- costs a few user commands and one autocommand; nothing runs a program or waits.
if vim.g.loaded_perflsp then
  return
end
vim.g.loaded_perflsp = true
local perflsp = require("perflsp")
perflsp.create_commands()
if vim.fn.has("nvim-0.11") == 0 then
  return
end

local reported = false
vim.api.nvim_create_autocmd("FileType", {
  group = vim.api.nvim_create_augroup("perflsp_check", { clear = true }),
  pattern = { "cuda", "c", "cpp" },
  callback = perflsp.timed(function()
    if reported or (vim.lsp.is_enabled and not vim.lsp.is_enabled("perflsp")) then
      return
    end
    local config = vim.lsp.config.perflsp
    local cmd = config and config.cmd
    if type(cmd) == "table" and cmd[1] and vim.fn.executable(cmd[1]) == 0 then
      reported = true
      perflsp.check_async(cmd[1], function(message)
        vim.notify(message, vim.log.levels.ERROR, { title = "perflsp" })
      end)
    end
  end),
})
