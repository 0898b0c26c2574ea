-- fimble: offline code completion from a local model (`fimble serve`), for Neovim 0.11+.
-- The one-file setup: copy into your config (e.g. ~/.config/nvim/plugin/fimble.lua). Needs `fimble`
-- on $PATH. Ghost text on 0.12; on 0.11 a completion item. For ghost text on 0.10/0.11, accept
-- word/line and :Fimble, install the plugin in this folder instead (lua/fimble, :help fimble).
vim.lsp.config('fimble', {
  cmd = { 'fimble', 'serve' },
  filetypes = { 'python', 'javascript', 'typescript', 'go', 'rust', 'java', 'c', 'cpp' },
  root_markers = { '.git', 'pyproject.toml', 'package.json', 'go.mod', 'Cargo.toml' },
  -- Settings (all optional): model, threads, maxTokens, multiline ('auto'|'always'|'never'),
  -- debounceMs, deadlineMs, prefixTokens, suffixTokens, languages, index = { exclude = {...} }.
  init_options = { multiline = 'auto' },
})
vim.lsp.enable('fimble')

vim.api.nvim_create_autocmd('LspAttach', {
  callback = function(args)
    local client = vim.lsp.get_client_by_id(args.data.client_id)
    if not client or client.name ~= 'fimble' then
      return
    end
    if vim.lsp.inline_completion then
      -- Neovim 0.12+: ghost text as you type; <Tab> accepts it.
      vim.lsp.inline_completion.enable(true, { bufnr = args.buf })
      vim.keymap.set('i', '<Tab>', function()
        if not vim.lsp.inline_completion.get() then
          return '<Tab>'
        end
      end, { buffer = args.buf, expr = true, desc = 'Accept the fimble suggestion' })
    else
      -- Neovim 0.11: the suggestion arrives as a completion item labelled "fimble".
      vim.lsp.completion.enable(true, client.id, args.buf, { autotrigger = true })
    end
  end,
})
