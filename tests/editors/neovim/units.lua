-- Checks of the plugin that need Neovim but no server: run with `nvim --headless -l units.lua PLUGIN OUT`.
local plugin, out = arg[1], arg[2]
vim.opt.runtimepath:prepend(plugin)
-- No plugin/fimble.lua: setup() alone must give :Fimble (lazy.nvim adds the folder late).
local ghost = require('fimble.text')
local results = {
  next_word = {},
  next_line = {},
}
for _, text in ipairs({ 'dt.date(year)', '.date(year)', '  foo bar', '\n    return x', '()', '' }) do
  table.insert(results.next_word, { text, ghost.next_word(text) })
end
for _, text in ipairs({ 'abc\ndef', '\n    x = 1\n    y', 'abc', '  \n  z' }) do
  table.insert(results.next_line, { text, ghost.next_line(text) })
end
-- What is shown for an item: its text minus what its range already covers before the cursor.
local function pos(line, character)
  return { line = line, character = character }
end
local line = '    s = "é" + foo'
results.shown = {
  { ghost.shown_text({ insertText = 'bar()' }, line, #line, 3, 'utf-16') },
  { ghost.shown_text({ insertText = 'foo_bar()', range = { start = pos(3, 14), ['end'] = pos(3, 17) } }, line, #line, 3, 'utf-16') },
  { ghost.shown_text({ insertText = 'fox()', range = { start = pos(3, 14), ['end'] = pos(3, 17) } }, line, #line, 3, 'utf-16') },
  { ghost.shown_text({ insertText = 'x', range = { start = pos(2, 0), ['end'] = pos(3, 17) } }, line, #line, 3, 'utf-16') },
}
local fimble = require('fimble')
fimble.setup({ cmd = { 'fimble-not-installed' }, filetypes = { 'lua' }, keymaps = { accept_word = false } })
results.mode = fimble.mode()
results.command = vim.fn.exists(':Fimble') == 2
results.complete = vim.fn.getcompletion('Fimble ', 'cmdline')
results.config = vim.lsp.config and vim.lsp.config.fimble and {
  cmd = vim.lsp.config.fimble.cmd,
  filetypes = vim.lsp.config.fimble.filetypes,
  init_options = vim.lsp.config.fimble.init_options,
  inline = vim.lsp.config.fimble.capabilities.textDocument.inlineCompletion,
} or vim.NIL
results.hl = vim.api.nvim_get_hl(0, { name = 'FimbleSuggestion' })
results.visible = fimble.visible()
-- The help file's tags.
local doc = vim.fn.tempname()
vim.fn.mkdir(doc, 'p')
vim.fn.writefile(vim.fn.readfile(plugin .. '/doc/fimble.txt'), doc .. '/fimble.txt')
local ok, err = pcall(vim.cmd.helptags, doc)
results.helptags = ok and vim.fn.readfile(doc .. '/tags') or tostring(err)
vim.fn.writefile({ vim.json.encode(results) }, out)
