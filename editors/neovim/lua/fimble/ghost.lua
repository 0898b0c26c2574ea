-- Ghost text for Neovim 0.10/0.11, which have no inline completion of their own.
--
-- While typing in insert mode, a debounced `textDocument/inlineCompletion` request is sent (the
-- previous one is cancelled: the server then stops its generation within a token). The answer is
-- drawn with one extmark at the cursor: the first line as inline virtual text, the others as
-- virtual lines below. Typing the suggestion's own characters keeps the rest shown without asking
-- again; any other edit or cursor move hides it.
local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('fimble')
local text_of = require('fimble.text')

---@class fimble.Suggestion
---@field row integer 0-based line of the cursor when shown
---@field col integer byte column of the cursor when shown
---@field before string the line's text before the cursor then
---@field text string what remains to insert
---@field end_col integer byte column the accepted text replaces up to (>= col)
---@field item table the server's InlineCompletionItem
---@field accepted integer characters of the item already accepted (partial accepts)
---@field tick integer the buffer's changedtick when it was last drawn

---@class fimble.BufState
---@field client_id integer
---@field timer uv.uv_timer_t?
---@field request_id integer?
---@field suggestion fimble.Suggestion?
---@field skip_tick integer? changedtick of our own edit, not to be answered with a new request
---@field stats { requests: integer, cancelled: integer, shown: integer, accepted: integer }

---@type table<integer, fimble.BufState>
local buffers = {}
local config = { debounce_ms = 75 }

M.namespace = ns

local function bufnr(buf)
  return (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
end

local function client_of(state)
  return state and vim.lsp.get_client_by_id(state.client_id)
end

local lsp_client = require('fimble.client')
local request, notify, cancel_request = lsp_client.request, lsp_client.notify, lsp_client.cancel_request

local function in_insert(buf)
  return api.nvim_get_current_buf() == buf and api.nvim_get_mode().mode:sub(1, 1) == 'i'
end

local function cursor()
  local pos = api.nvim_win_get_cursor(0)
  return pos[1] - 1, pos[2]
end

local function current_line(buf, row)
  return api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ''
end

--- Redraw the extmark of the buffer's suggestion (or remove it).
local function render(buf)
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  local s = buffers[buf] and buffers[buf].suggestion
  if not s or s.text == '' then
    return
  end
  local tab = string.rep(' ', vim.bo[buf].tabstop)
  local lines = vim.split(s.text:gsub('\t', tab), '\n', { plain = true })
  local opts = { hl_mode = 'combine', priority = 1000 }
  if lines[1] ~= '' then
    opts.virt_text = { { lines[1], 'FimbleSuggestion' } }
    opts.virt_text_pos = 'inline'
  end
  if #lines > 1 then
    opts.virt_lines = {}
    for i = 2, #lines do
      table.insert(opts.virt_lines, { { lines[i], 'FimbleSuggestion' } })
    end
  end
  api.nvim_buf_set_extmark(buf, ns, s.row, s.col, opts)
end

local function set(buf, suggestion)
  if suggestion then
    suggestion.tick = api.nvim_buf_get_changedtick(buf)
  end
  buffers[buf].suggestion = suggestion
  render(buf)
end

--- Hide the suggestion (the server keeps no state for it).
function M.clear(buf)
  buf = bufnr(buf)
  if buffers[buf] then
    buffers[buf].suggestion = nil
  end
  if api.nvim_buf_is_valid(buf) then
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  end
end

local function cancel(buf)
  local state = buffers[buf]
  if not state then
    return
  end
  if state.timer then
    state.timer:stop()
  end
  local client = client_of(state)
  if state.request_id and client then
    cancel_request(client, state.request_id)
    state.stats.cancelled = state.stats.cancelled + 1
  end
  state.request_id = nil
end

local function on_response(buf, id, tick, row, col, encoding)
  return function(err, result)
    local state = buffers[buf]
    if not state or state.request_id ~= id then
      return -- superseded
    end
    state.request_id = nil
    if err or not result or not in_insert(buf) or api.nvim_buf_get_changedtick(buf) ~= tick then
      return
    end
    local r, c = cursor()
    if r ~= row or c ~= col then
      return
    end
    local items = result.items or result
    local item = items[1]
    if not item then
      return
    end
    local line = current_line(buf, row)
    local text, end_col = text_of.shown_text(item, line, col, row, encoding)
    if not text or text == '' then
      return
    end
    set(buf, {
      row = row, col = col, before = line:sub(1, col), text = text, end_col = end_col, item = item, accepted = 0,
    })
    state.stats.shown = state.stats.shown + 1
    local client = client_of(state)
    if client then
      notify(client, 'textDocument/didShowCompletion', { item = item })
    end
    api.nvim_exec_autocmds('User', { pattern = 'FimbleSuggestion', modeline = false, data = { buf = buf, text = text } })
  end
end

--- Ask the server now. ``invoked``: the user asked (mid-word too, and even when toggled off).
function M.request(buf, invoked)
  local state = buffers[buf]
  local client = client_of(state)
  if not client or not in_insert(buf) then
    return
  end
  cancel(buf)
  local row, col = cursor()
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = invoked and 1 or 2 }
  local tick = api.nvim_buf_get_changedtick(buf)
  local handler
  local ok, id = request(client, 'textDocument/inlineCompletion', params, function(err, result)
    handler(err, result)
  end, buf)
  if not ok then
    return
  end
  handler = on_response(buf, id, tick, row, col, client.offset_encoding)
  state.request_id = id
  state.stats.requests = state.stats.requests + 1
end

local function schedule(buf)
  local state = buffers[buf]
  if not state.timer then
    state.timer = vim.uv.new_timer()
  end
  state.timer:stop()
  state.timer:start(config.debounce_ms, 0, vim.schedule_wrap(function()
    if buffers[buf] then
      M.request(buf, false)
    end
  end))
end

--- The user typed what the suggestion shows: keep its rest, without a request.
local function typed_through(buf, s, row, col)
  if row ~= s.row or col <= s.col then
    return false
  end
  local line = current_line(buf, row)
  local typed = line:sub(s.col + 1, col)
  if line:sub(1, s.col) ~= s.before or typed:find('\n', 1, true) or s.text:sub(1, #typed) ~= typed then
    return false
  end
  if #typed >= #s.text then
    return false
  end
  s.text = s.text:sub(#typed + 1)
  s.col, s.before, s.end_col = col, line:sub(1, col), math.max(col, s.end_col + #typed)
  return true
end

local function on_change(buf)
  local state = buffers[buf]
  if not state or not in_insert(buf) then
    return
  end
  if state.skip_tick == api.nvim_buf_get_changedtick(buf) then
    return -- our own accept
  end
  local s = state.suggestion
  local row, col = cursor()
  if s and typed_through(buf, s, row, col) then
    set(buf, s)
    return
  end
  cancel(buf)
  M.clear(buf)
  schedule(buf)
end

local function on_move(buf)
  local state = buffers[buf]
  local s = state and state.suggestion
  if not s then
    return
  end
  local row, col = cursor()
  -- Moved without typing (arrows, mouse): the suggestion no longer belongs here. (A keystroke moves
  -- the cursor too, but it also changes the buffer: on_change decides then.)
  if (row ~= s.row or col ~= s.col) and api.nvim_buf_get_changedtick(buf) == s.tick then
    M.clear(buf)
  end
end

function M.visible(buf)
  buf = bufnr(buf)
  local state = buffers[buf]
  return state ~= nil and state.suggestion ~= nil and state.suggestion.text ~= ''
end

--- Insert the suggestion, or its next word or line ('all' | 'word' | 'line'); true if it did.
function M.accept(buf, what)
  buf = bufnr(buf)
  local state = buffers[buf]
  local s = state and state.suggestion
  if not s then
    return false
  end
  local part = what == 'word' and text_of.next_word(s.text) or what == 'line' and text_of.next_line(s.text) or s.text
  local rest = s.text:sub(#part + 1)
  local lines = vim.split(part, '\n', { plain = true })
  local end_col = rest == '' and s.end_col or s.col
  api.nvim_buf_set_text(buf, s.row, s.col, s.row, end_col, lines)
  local row = s.row + #lines - 1
  local col = (#lines == 1 and s.col or 0) + #lines[#lines]
  api.nvim_win_set_cursor(0, { row + 1, col })
  state.skip_tick = api.nvim_buf_get_changedtick(buf)
  local client = client_of(state)
  s.accepted = s.accepted + vim.fn.strchars(part)
  if rest == '' then
    state.stats.accepted = state.stats.accepted + 1
    M.clear(buf)
    if client and s.item.command then
      request(client, 'workspace/executeCommand', s.item.command, function() end, buf)
    end
  else
    s.row, s.col, s.text = row, col, rest
    s.before, s.end_col = current_line(buf, row):sub(1, col), col + (s.end_col - end_col)
    set(buf, s)
    if client then
      notify(client, 'textDocument/didPartiallyAcceptCompletion', { item = s.item, acceptedLength = s.accepted })
    end
  end
  return true
end

function M.dismiss(buf)
  buf = bufnr(buf)
  cancel(buf)
  local shown = M.visible(buf)
  M.clear(buf)
  return shown
end

function M.trigger(buf)
  buf = bufnr(buf)
  M.clear(buf)
  M.request(buf, true)
end

--- Whether a request is on its way (sent, or waiting for the debounce).
function M.pending(buf)
  buf = bufnr(buf)
  local state = buffers[buf]
  return state ~= nil and (state.request_id ~= nil or (state.timer ~= nil and state.timer:is_active()))
end

--- Counters for tests and :Fimble status.
function M.stats(buf)
  buf = bufnr(buf)
  return buffers[buf] and vim.deepcopy(buffers[buf].stats)
end

--- The suggestion shown in ``buf`` (a copy), or nil.
function M.current(buf)
  buf = bufnr(buf)
  return buffers[buf] and vim.deepcopy(buffers[buf].suggestion)
end

function M.detach(buf)
  cancel(buf)
  M.clear(buf)
  local state = buffers[buf]
  if state and state.timer then
    state.timer:close()
  end
  buffers[buf] = nil
  pcall(api.nvim_del_augroup_by_name, 'fimble_ghost_' .. buf)
end

function M.attach(client, buf, cfg)
  config = cfg or config
  if buffers[buf] then
    buffers[buf].client_id = client.id
    return
  end
  buffers[buf] = { client_id = client.id, stats = { requests = 0, cancelled = 0, shown = 0, accepted = 0 } }
  local group = api.nvim_create_augroup('fimble_ghost_' .. buf, { clear = true })
  local function au(events, fn)
    api.nvim_create_autocmd(events, { group = group, buffer = buf, callback = function() fn(buf) end })
  end
  au({ 'TextChangedI', 'TextChangedP' }, on_change)
  au('CursorMovedI', on_move)
  au({ 'InsertLeave', 'BufLeave' }, M.dismiss)
  api.nvim_create_autocmd('LspDetach', {
    group = group,
    buffer = buf,
    callback = function(args)
      if args.data and buffers[buf] and args.data.client_id == buffers[buf].client_id then
        M.detach(buf)
      end
    end,
  })
end

return M
