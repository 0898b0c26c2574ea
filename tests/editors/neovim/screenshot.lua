-- Neovim with its real terminal UI, for the README's screenshot: the plugin set up as the README
-- says, a readable layout, and two marker files for the test: $FIMBLE_READY once the model is
-- loaded, $FIMBLE_SHOWN once a suggestion is drawn (its text inside).
vim.opt.runtimepath:prepend(vim.env.FIMBLE_PLUGIN)
vim.cmd('runtime plugin/fimble.lua')
vim.cmd('filetype plugin indent on')
vim.cmd('syntax on')
vim.o.termguicolors = true
vim.o.background = 'dark'
vim.o.number = true
vim.o.swapfile = false
vim.o.showmode = true
vim.o.laststatus = 2

require('fimble').setup(vim.json.decode(vim.env.FIMBLE_SETUP))

vim.api.nvim_create_autocmd('User', {
  pattern = 'FimbleSuggestion',
  callback = function(args)
    vim.fn.writefile(vim.split(args.data.text, '\n'), vim.env.FIMBLE_SHOWN)
  end,
})

vim.api.nvim_create_autocmd('LspAttach', {
  callback = function(args)
    local client = vim.lsp.get_client_by_id(args.data.client_id)
    if not client or client.name ~= 'fimble' then
      return
    end
    local function poll()
      client:request('workspace/executeCommand', { command = 'fimble.status' }, function(_, st)
        if st and st.model and st.model.state == 'ready' then
          vim.fn.writefile({ 'ready' }, vim.env.FIMBLE_READY)
        else
          vim.defer_fn(poll, 200)
        end
      end, args.buf)
    end
    poll()
  end,
})

vim.cmd.edit(vim.env.FIMBLE_FILE)
