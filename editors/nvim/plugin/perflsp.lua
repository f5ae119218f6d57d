-- :PerflspGpus and :PerflspStatus for every setup; on Neovim 0.11+, where perflsp is started by
-- vim.lsp.enable("perflsp") with lsp/perflsp.lua, Neovim only writes a wrong interpreter path to its
-- LSP log: say it where the user looks.
if vim.g.loaded_perflsp then
  return
end
vim.g.loaded_perflsp = true
require("perflsp").create_commands()
if vim.fn.has("nvim-0.11") == 0 then
  return
end

local reported = false
vim.api.nvim_create_autocmd("FileType", {
  group = vim.api.nvim_create_augroup("perflsp_check", { clear = true }),
  pattern = { "cuda", "c", "cpp" },
  callback = function()
    local enabled = vim.lsp.is_enabled and vim.lsp.is_enabled("perflsp") or (vim.lsp._enabled_configs or {}).perflsp
    if reported or not enabled then
      return
    end
    local config = vim.lsp.config.perflsp
    local cmd = config and config.cmd
    if type(cmd) == "table" and cmd[1] and vim.fn.executable(cmd[1]) == 0 then
      reported = true
      local message = require("perflsp").check(cmd[1])
      vim.schedule(function()
        vim.notify(message, vim.log.levels.ERROR, { title = "perflsp" })
      end)
    end
  end,
})
