-- fimble: offline code completion from a local model, as a Neovim plugin (0.10+).
--
--   require('fimble').setup({ ... })   -- see :help fimble
--
-- The language server (`fimble serve`) does the work; this plugin starts it through vim.lsp and shows
-- its suggestions as ghost text: Neovim 0.12's own inline completion when there is one, otherwise
-- extmarks drawn by lua/fimble/ghost.lua from `textDocument/inlineCompletion` requests sent while
-- typing.
local M = {}

---@class fimble.Keymaps
---@field accept string|false       accept the whole suggestion
---@field accept_word string|false  accept its next word
---@field accept_line string|false  accept the rest of its current line
---@field dismiss string|false      hide it
---@field trigger string|false      ask for one now (even mid-word, or when toggled off)

---@class fimble.Config
M.defaults = {
  cmd = { 'fimble', 'serve' },
  filetypes = { 'python', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact', 'go', 'rust', 'java', 'c', 'cpp' },
  root_markers = { '.git', 'pyproject.toml', 'setup.py', 'package.json', 'go.mod', 'Cargo.toml', 'pom.xml' },
  -- Language-server settings, sent as initializationOptions (see the README's table): model, threads,
  -- maxTokens, multiline, deadlineMs, prefixTokens, suffixTokens, languages, index = { exclude = {} }, ...
  settings = { multiline = 'auto' },
  -- 'auto': Neovim's inline completion on 0.12+, the plugin's extmarks on 0.10/0.11.
  -- 'builtin' | 'plugin' force one; false: no ghost text, the suggestion is a completion item instead.
  ghost_text = 'auto',
  debounce_ms = 75, -- wait after the last keystroke before asking (the previous request is cancelled)
  -- Tell the server where the cursor rests after this long (didFocus), so the suggestion there is
  -- ready before you type; 0 or false: never.
  focus_ms = 300,
  -- When ghost_text is false: open the completion menu while typing (vim.lsp.completion, 0.11+);
  -- the item is always available through omnifunc (<C-x><C-o>).
  completion_autotrigger = true,
  keymaps = {
    accept = '<Tab>',
    accept_word = '<M-Right>',
    accept_line = '<M-C-Right>',
    dismiss = '<C-]>',
    trigger = '<M-\\>',
  },
  hl_group = 'Comment', -- what FimbleSuggestion links to
}

---@type fimble.Config
M.config = vim.deepcopy(M.defaults)

local augroup = vim.api.nvim_create_augroup('fimble', { clear = true })

--- The renderer this Neovim uses: 'builtin', 'plugin' or false.
function M.mode()
  local want = M.config.ghost_text
  if want == 'auto' then
    return vim.lsp.inline_completion ~= nil and 'builtin' or 'plugin'
  end
  if want == 'builtin' and vim.lsp.inline_completion == nil then
    return 'plugin'
  end
  return want
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  if M.mode() == 'plugin' then
    -- We show inline completions ourselves: the server then does not offer the same suggestion
    -- again as a completion item (its completionFallback 'auto').
    caps.textDocument.inlineCompletion = { dynamicRegistration = false }
  end
  return caps
end

local function server_config()
  return {
    cmd = M.config.cmd,
    filetypes = M.config.filetypes,
    root_markers = M.config.root_markers,
    init_options = M.config.settings,
    capabilities = capabilities(),
  }
end

--- Keymaps of one buffer. Each is an expression mapping that falls back to the key itself when
--- there is no suggestion, so <Tab> still indents.
local function map_keys(buf)
  local km = M.config.keymaps
  local mode = M.mode()
  local function map(lhs, action, desc)
    if not lhs then
      return
    end
    vim.keymap.set('i', lhs, function()
      if action == 'trigger' or M.visible(buf) then
        return ('<Cmd>lua require("fimble").%s()<CR>'):format(action)
      end
      return lhs
    end, { buffer = buf, expr = true, desc = desc })
  end
  if mode == 'builtin' then
    if km.accept then
      vim.keymap.set('i', km.accept, function()
        if not vim.lsp.inline_completion.get() then
          return km.accept
        end
      end, { buffer = buf, expr = true, desc = 'fimble: accept the suggestion' })
    end
    return
  end
  map(km.accept, 'accept', 'fimble: accept the suggestion')
  map(km.accept_word, 'accept_word', "fimble: accept the suggestion's next word")
  map(km.accept_line, 'accept_line', "fimble: accept the suggestion's line")
  map(km.dismiss, 'dismiss', 'fimble: dismiss the suggestion')
  map(km.trigger, 'trigger', 'fimble: ask for a suggestion')
end

local function on_attach(client, buf)
  local mode = M.mode()
  if mode == 'builtin' then
    vim.lsp.inline_completion.enable(true, { bufnr = buf })
  elseif mode == 'plugin' then
    require('fimble.ghost').attach(client, buf, M.config)
  else
    require('fimble.fallback').attach(client, buf, M.config)
  end
  if mode then
    map_keys(buf)
    require('fimble.focus').attach(client, buf, M.config)
  end
end

--- Configure and enable the `fimble` language server (call once, from your config).
---@param opts? fimble.Config
function M.setup(opts)
  opts = opts or {}
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  for _, key in ipairs({ 'cmd', 'filetypes', 'root_markers' }) do
    if opts[key] then -- lists replace the default, not merge into it index by index
      M.config[key] = opts[key]
    end
  end
  vim.api.nvim_set_hl(0, 'FimbleSuggestion', { link = M.config.hl_group, default = true })
  require('fimble.command').create()
  vim.api.nvim_clear_autocmds({ group = augroup })
  vim.api.nvim_create_autocmd('LspAttach', {
    group = augroup,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == 'fimble' then
        on_attach(client, args.buf)
      end
    end,
  })
  if vim.lsp.config then -- 0.11+
    vim.lsp.config('fimble', server_config())
    vim.lsp.enable('fimble')
  else -- 0.10: start the client per buffer ourselves
    vim.api.nvim_create_autocmd('FileType', {
      group = augroup,
      pattern = M.config.filetypes,
      callback = function(args)
        local cfg = server_config()
        cfg.name = 'fimble'
        cfg.root_dir = vim.fs.root(args.buf, cfg.root_markers) or vim.fn.getcwd()
        vim.lsp.start(cfg, { bufnr = args.buf })
      end,
    })
  end
end

--- The fimble client attached to a buffer (the current one by default).
function M.client(buf)
  local get = vim.lsp.get_clients or vim.lsp.get_active_clients
  return get({ bufnr = buf or vim.api.nvim_get_current_buf(), name = 'fimble' })[1]
end

local function ghost()
  return require('fimble.ghost')
end

--- Whether a suggestion is shown in the buffer.
function M.visible(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  if M.mode() == 'plugin' then
    return ghost().visible(buf)
  end
  return false
end

function M.accept()
  if M.mode() == 'builtin' then
    return vim.lsp.inline_completion.get()
  end
  return ghost().accept(vim.api.nvim_get_current_buf(), 'all')
end

function M.accept_word()
  return ghost().accept(vim.api.nvim_get_current_buf(), 'word')
end

function M.accept_line()
  return ghost().accept(vim.api.nvim_get_current_buf(), 'line')
end

function M.dismiss()
  return ghost().dismiss(vim.api.nvim_get_current_buf())
end

function M.trigger()
  if M.mode() == 'builtin' then
    return vim.lsp.inline_completion.get()
  end
  return ghost().trigger(vim.api.nvim_get_current_buf())
end

-- :Fimble subcommands live in lua/fimble/command.lua (loaded on first use).
function M.command(args)
  return require('fimble.command').run(args)
end

return M
