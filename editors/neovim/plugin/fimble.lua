-- :Fimble status | toggle | explain[!] | reindex. The plugin itself starts with require('fimble').setup().
if vim.g.loaded_fimble then
  return
end
vim.g.loaded_fimble = true

vim.api.nvim_create_user_command('Fimble', function(args)
  require('fimble.command').run(args)
end, {
  nargs = '?',
  bang = true,
  desc = 'fimble: status | toggle | explain[!] | reindex',
  complete = function(arglead)
    return require('fimble.command').complete(arglead)
  end,
})
