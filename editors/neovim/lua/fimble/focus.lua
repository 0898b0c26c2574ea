-- Tells the server where the cursor rests: `textDocument/didFocus` with the cursor's position (fimble's
-- extension of Copilot's notification) when you enter a buffer or stop moving the cursor for
-- `focus_ms`. The server starts the suggestion there while you read, so the first keystroke finds it
-- ready (or its prompt already evaluated). Places the server already has an answer for cost nothing.
local M = {}

local lsp_client = require('fimble.client')
local uv = vim.uv or vim.loop

local timers = {} ---@type table<integer, uv_timer_t>

local function send(client, buf)
  if not vim.api.nvim_buf_is_valid(buf) or vim.api.nvim_get_current_buf() ~= buf or lsp_client.is_stopped(client) then
    return
  end
  local mode = vim.api.nvim_get_mode().mode
  if mode ~= 'n' and mode ~= 'i' then -- visual selections, the command line: not a place to type
    return
  end
  lsp_client.notify(client, 'textDocument/didFocus', vim.lsp.util.make_position_params(0, client.offset_encoding))
end

--- Send didFocus for `buf` after the cursor rests `config.focus_ms` (0 or false: never).
function M.attach(client, buf, config)
  local ms = config.focus_ms
  if not ms or ms <= 0 then
    return
  end
  local group = vim.api.nvim_create_augroup('fimble_focus_' .. buf, { clear = true })
  vim.api.nvim_create_autocmd({ 'BufEnter', 'CursorMoved', 'CursorMovedI' }, {
    group = group,
    buffer = buf,
    callback = function()
      local timer = timers[buf]
      if not timer then
        timer = uv.new_timer()
        timers[buf] = timer
      end
      timer:stop()
      timer:start(ms, 0, vim.schedule_wrap(function()
        send(client, buf)
      end))
    end,
  })
  vim.api.nvim_create_autocmd('BufWipeout', {
    group = group,
    buffer = buf,
    callback = function()
      if timers[buf] then
        timers[buf]:close()
        timers[buf] = nil
      end
    end,
  })
end

return M
