-- Pure text helpers of the ghost text: what to show for an item, and what accept-word and
-- accept-line take. No buffer or window state here.
local M = {}

local has_011 = vim.fn.has('nvim-0.11') == 1

--- The byte column of an LSP position's character on ``line`` (in the client's encoding).
function M.byte_col(line, character, encoding)
  if encoding == 'utf-8' then
    return math.min(character, #line)
  end
  if has_011 then
    return vim.str_byteindex(line, encoding, character, false)
  end
  return vim.lsp.util._str_byteindex_enc(line, character, encoding)
end

--- The text to show for an item: its insertText without what is already typed before the cursor
--- (the item's range may start before it), or nil when the item does not fit the line.
function M.shown_text(item, line, col, row, encoding)
  local text = type(item.insertText) == 'table' and item.insertText.value or item.insertText or ''
  local end_col = col
  if item.range then
    local start, stop = item.range.start, item.range['end']
    if start.line ~= row or stop.line ~= row then
      return nil
    end
    local start_col = M.byte_col(line, start.character, encoding)
    end_col = math.max(col, M.byte_col(line, stop.character, encoding))
    local typed = line:sub(start_col + 1, col)
    if start_col > col or text:sub(1, #typed) ~= typed then
      return nil
    end
    text = text:sub(#typed + 1)
  end
  return text, end_col
end

--- The part of ``text`` that accept-word takes: leading blanks and newlines, then one word (or one
--- run of punctuation).
function M.next_word(text)
  return text:match('^%s*[%w_]+') or text:match('^%s*[^%w_%s]+') or text
end

--- The part accept-line takes: the rest of the current line, or the next line when the suggestion
--- starts a new one.
function M.next_line(text)
  local nl = text:find('\n', 1, true)
  if not nl then
    return text
  end
  if text:sub(1, nl - 1):match('^%s*$') then
    local nl2 = text:find('\n', nl + 1, true)
    return nl2 and text:sub(1, nl2 - 1) or text
  end
  return text:sub(1, nl - 1)
end

return M
