-- :Fimble status | toggle | explain[!] | reindex
--
-- Each runs one of the server's workspace/executeCommand commands and shows the answer: status and
-- explain in a floating window (q closes it), toggle and reindex as a message.
local M = {}

local api = vim.api

M.subcommands = { 'status', 'toggle', 'explain', 'reindex' }

local function fimble()
  return require('fimble')
end

local function execute(command, arguments, on_result)
  local client = fimble().client()
  if not client then
    vim.notify('fimble: no fimble server is attached to this buffer (check :checkhealth vim.lsp)', vim.log.levels.WARN)
    return
  end
  local params = { command = command, arguments = arguments }
  local handler = function(err, result)
    if err then
      vim.notify(('fimble: %s failed: %s'):format(command, err.message or vim.inspect(err)), vim.log.levels.ERROR)
      return
    end
    on_result(result or {})
  end
  if vim.fn.has('nvim-0.11') == 1 then
    client:request('workspace/executeCommand', params, handler, 0)
  else
    client.request('workspace/executeCommand', params, handler, 0)
  end
end

--- ``key: value`` lines of a nested table (dotted keys), sorted, for reading at a glance.
function M.flatten(value, prefix, out)
  out = out or {}
  if type(value) == 'table' and not vim.islist(value) and next(value) ~= nil then
    local keys = vim.tbl_keys(value)
    table.sort(keys, function(a, b)
      return tostring(a) < tostring(b)
    end)
    for _, k in ipairs(keys) do
      M.flatten(value[k], prefix and (prefix .. '.' .. k) or tostring(k), out)
    end
  else
    local text = type(value) == 'table' and vim.json.encode(value) or tostring(value)
    table.insert(out, ('%s: %s'):format(prefix or '', text))
  end
  return out
end

--- A scratch buffer in a floating window; `q` or <Esc> closes it.
function M.show(title, lines)
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].filetype = 'fimble'
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  width = math.min(width + 2, math.max(20, vim.o.columns - 4))
  local height = math.min(#lines, math.max(1, vim.o.lines - 6))
  local win = api.nvim_open_win(buf, true, {
    relative = 'editor',
    width = width,
    height = height,
    row = math.floor((vim.o.lines - height) / 2) - 1,
    col = math.floor((vim.o.columns - width) / 2),
    style = 'minimal',
    border = 'rounded',
    title = ' ' .. title .. ' ',
  })
  for _, key in ipairs({ 'q', '<Esc>' }) do
    vim.keymap.set('n', key, function()
      pcall(api.nvim_win_close, win, true)
    end, { buffer = buf, nowait = true })
  end
  return buf, win
end

function M.status()
  execute('fimble.status', nil, function(st)
    local lines = M.flatten(st)
    local stats = require('fimble.ghost').stats(api.nvim_get_current_buf())
    if stats then
      vim.list_extend(lines, M.flatten(stats, 'neovim'))
    end
    M.show('fimble status', lines)
  end)
end

function M.toggle()
  execute('fimble.toggle', nil, function(result)
    if result.enabled == false then
      require('fimble.ghost').dismiss(api.nvim_get_current_buf())
    end
  end)
end

--- The last request as the server saw it (trigger, context files, tokens evaluated and reused,
--- timings, stop reason). With a bang: `fimble explain` for the cursor in a terminal, which shows
--- every part of the prompt with its tokens and why it is there (it loads its own model).
function M.explain(bang)
  if bang then
    return M.explain_cursor()
  end
  execute('fimble.status', nil, function(st)
    local last = st.last or {}
    if next(last) == nil then
      vim.notify('fimble: no request yet; type in insert mode first (or :Fimble explain! for the cursor)', vim.log.levels.INFO)
      return
    end
    -- The server explains the prompt it built: its parts with tokens and reasons, then timings.
    local explained = type(last.explain) == 'table' and last.explain.lines or nil
    local lines = explained and vim.list_extend(vim.deepcopy(explained), { '' }) or {}
    local rest = vim.deepcopy(last)
    rest.explain = nil
    vim.list_extend(lines, M.flatten(rest))
    table.insert(lines, '')
    table.insert(lines, ':Fimble explain! shows every part of the prompt for the cursor')
    M.show('fimble: last request', lines)
  end)
end

--- `fimble explain FILE:LINE:COL` for the cursor, in a terminal split, with the server's model.
function M.explain_cursor()
  local file = api.nvim_buf_get_name(0)
  if file == '' or vim.bo.modified then
    vim.notify('fimble: explain reads the file from disk: :write it first', vim.log.levels.WARN)
    return
  end
  local pos = api.nvim_win_get_cursor(0)
  local col = vim.fn.charidx(api.nvim_get_current_line(), pos[2]) + 1
  execute('fimble.status', nil, function(st)
    local argv = { fimble().config.cmd[1], 'explain' }
    if st.model and st.model.path then
      vim.list_extend(argv, { '--model', st.model.path })
    end
    local max_tokens = (fimble().config.settings or {}).maxTokens
    if max_tokens then
      vim.list_extend(argv, { '--max-tokens', tostring(max_tokens) })
    end
    table.insert(argv, ('%s:%d:%d'):format(file, pos[1], col))
    vim.cmd('botright new')
    if vim.fn.has('nvim-0.11') == 1 then
      vim.fn.jobstart(argv, { term = true })
    else
      vim.fn.termopen(argv)
    end
    vim.bo.filetype = 'fimble-explain'
  end)
end

function M.reindex()
  vim.notify('fimble: reindexing the workspace…')
  execute('fimble.reindex', nil, function(result)
    if result.error then
      vim.notify('fimble: ' .. result.error, vim.log.levels.ERROR)
    else
      vim.notify('fimble: index up to date ' .. vim.json.encode(result.index or {}))
    end
  end)
end

--- Entry point of :Fimble (``args`` as given to a user command's callback).
function M.run(args)
  local sub, bang = args.fargs[1] or 'status', args.bang
  if sub:sub(-1) == '!' then -- `:Fimble explain!` (as well as `:Fimble! explain`)
    sub, bang = sub:sub(1, -2), true
  end
  if sub == 'explain' then
    return M.explain(bang)
  end
  if not vim.tbl_contains(M.subcommands, sub) then
    vim.notify(('fimble: unknown subcommand %q; try one of: %s'):format(sub, table.concat(M.subcommands, ', ')), vim.log.levels.ERROR)
    return
  end
  return M[sub]()
end

function M.complete(arglead)
  return vim.tbl_filter(function(s)
    return s:find(arglead, 1, true) == 1
  end, M.subcommands)
end

--- Define :Fimble (plugin/fimble.lua does at startup; setup() again, for plugin managers that add
--- this folder to 'runtimepath' after plugin/ files were sourced).
function M.create()
  vim.api.nvim_create_user_command('Fimble', function(args)
    M.run(args)
  end, {
    nargs = '?',
    bang = true,
    desc = 'fimble: status | toggle | explain[!] | reindex',
    complete = function(arglead)
      return M.complete(arglead)
    end,
  })
end

return M
