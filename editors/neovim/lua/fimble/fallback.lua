-- The completion-item fallback (ghost_text = false): fimble's suggestion is one completion item.
--
-- Neovim inserts only a plain-text item's first word (its textEdit's text up to the first blank) when
-- it is chosen from the menu; for fimble's item, the whole suggestion is meant. After the item is
-- accepted, the word Neovim inserted is replaced with the item's whole text.
local M = {}

local api = vim.api

local function fimble_item(completed)
  local lsp_item = vim.tbl_get(completed or {}, 'user_data', 'nvim', 'lsp', 'completion_item')
  if type(lsp_item) ~= 'table' or not lsp_item.textEdit then
    return nil
  end
  local details = lsp_item.labelDetails or {}
  return details.description == 'fimble' and lsp_item or nil
end

local function on_complete_done(buf)
  local completed = vim.v.completed_item
  local item = fimble_item(completed)
  local reason = vim.v.event and vim.v.event.reason
  if not item or (reason and reason ~= 'accept') then
    return
  end
  local word, text = completed.word or '', item.textEdit.newText
  local row, col = unpack(api.nvim_win_get_cursor(0))
  local line = api.nvim_get_current_line()
  local start = col - #word
  if word == text or start < 0 or line:sub(start + 1, col) ~= word then
    return
  end
  local lines = vim.split(text, '\n', { plain = true })
  api.nvim_buf_set_text(buf, row - 1, start, row - 1, col, lines)
  local end_row = row + #lines - 1
  local end_col = (#lines == 1 and start or 0) + #lines[#lines]
  api.nvim_win_set_cursor(0, { end_row, end_col })
end

function M.attach(client, buf, config)
  if vim.lsp.completion and vim.lsp.completion.enable then -- 0.11+: the menu while typing
    vim.lsp.completion.enable(true, client.id, buf, { autotrigger = config.completion_autotrigger })
  end
  api.nvim_create_autocmd('CompleteDone', {
    group = api.nvim_create_augroup('fimble_fallback_' .. buf, { clear = true }),
    buffer = buf,
    callback = function()
      on_complete_done(buf)
    end,
  })
end

return M
