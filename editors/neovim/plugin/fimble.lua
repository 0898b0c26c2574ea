-- :Fimble status | toggle | explain[!] | reindex. The plugin itself starts with require('fimble').setup().
if vim.g.loaded_fimble then
  return
end
vim.g.loaded_fimble = true

require('fimble.command').create()
