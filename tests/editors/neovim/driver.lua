-- Drives a headless Neovim like a user: the plugin from editors/neovim on the runtimepath, set up as
-- the README says, a file opened, keys typed with nvim_feedkeys. Each step's observations go into
-- one JSON file ($FIMBLE_OUT) that the pytest side checks. The scenario is $FIMBLE_SCENARIO.
vim.opt.runtimepath:prepend(vim.env.FIMBLE_PLUGIN)
vim.cmd('runtime plugin/fimble.lua')
vim.cmd('filetype plugin indent on')
vim.o.swapfile = false

local scenario = vim.env.FIMBLE_SCENARIO
local out = { steps = {}, nvim = tostring(vim.version()) }

local function finish(err)
  out.error = err
  vim.fn.writefile({ vim.json.encode(out) }, vim.env.FIMBLE_OUT)
  vim.cmd('qall!')
end

local function sleep(ms)
  local co = coroutine.running()
  vim.defer_fn(function()
    local ok, err = coroutine.resume(co)
    if not ok then
      finish(debug.traceback(co, err))
    end
  end, ms)
  coroutine.yield()
end

local function wait_for(pred, timeout_ms)
  local waited = 0
  while not pred() do
    if waited >= timeout_ms then
      return false
    end
    sleep(50)
    waited = waited + 50
  end
  return true
end

local function type_keys(keys)
  vim.api.nvim_feedkeys(vim.keycode(keys), 't', false)
  sleep(30) -- let the main loop read them
end

local function marks()
  local ghost = require('fimble.ghost')
  local out_marks = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(0, ghost.namespace, 0, -1, { details = true })) do
    local d = m[4]
    local lines = {}
    for _, vl in ipairs(d.virt_lines or {}) do
      table.insert(lines, vl[1][1])
    end
    table.insert(out_marks, {
      row = m[2],
      col = m[3],
      virt_text = d.virt_text and d.virt_text[1][1] or vim.NIL,
      virt_text_pos = d.virt_text_pos or vim.NIL,
      virt_lines = lines,
      hl = d.virt_text and d.virt_text[1][2] or vim.NIL,
    })
  end
  return out_marks
end

local function snapshot(name, extra)
  local ghost = require('fimble.ghost')
  local s = ghost.current(0)
  local pos = vim.api.nvim_win_get_cursor(0)
  local step = {
    name = name,
    lines = vim.api.nvim_buf_get_lines(0, 0, -1, false),
    cursor = { pos[1], pos[2] },
    mode = vim.api.nvim_get_mode().mode,
    suggestion = s and s.text or vim.NIL,
    marks = marks(),
    stats = ghost.stats(0) or vim.NIL,
  }
  for k, v in pairs(extra or {}) do
    step[k] = v
  end
  table.insert(out.steps, step)
  return step
end

local function visible()
  return require('fimble').visible(0)
end

--- Type ``keys``, then wait for a suggestion. While the model loads the server answers with
--- nothing at once: then ask again with the trigger key (never while a request is running, which
--- would cancel it).
local function type_and_wait(keys, timeout_ms)
  local ghost = require('fimble.ghost')
  type_keys(keys)
  local waited = 0
  while not visible() and waited < timeout_ms do
    if not ghost.pending(0) then
      sleep(500)
      if visible() then
        break
      end
      type_keys('<M-\\>')
    end
    sleep(100)
    waited = waited + 100
  end
  return visible()
end

local function float_lines()
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    local buf = vim.api.nvim_win_get_buf(win)
    if vim.bo[buf].filetype == 'fimble' then
      local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
      vim.api.nvim_win_close(win, true)
      return lines
    end
  end
end

local function attached()
  return wait_for(function()
    return require('fimble').client() ~= nil
  end, 60000)
end

local scenarios = {}

-- Ghost text while typing, accept word / line, dismiss, accept all, :Fimble commands.
function scenarios.ghost()
  require('fimble').setup(vim.json.decode(vim.env.FIMBLE_SETUP))
  vim.cmd.edit(vim.env.FIMBLE_FILE)
  if not attached() then
    return finish('fimble never attached')
  end
  out.offset_encoding = require('fimble').client().offset_encoding
  out.mode = require('fimble').mode()
  -- Line 8 is "        dates.": type the call the way a user would.
  vim.api.nvim_win_set_cursor(0, { 8, 0 })
  type_keys('A')
  out.shown = type_and_wait('append(', 600000)
  snapshot('shown')
  if not out.shown then
    return finish('no suggestion was shown')
  end
  type_keys('<M-Right>')
  sleep(200)
  snapshot('accept_word')
  type_keys('<M-C-Right>')
  sleep(200)
  snapshot('accept_line')
  -- A new function: its body is a multi-line suggestion (ask if the automatic one does not come).
  type_keys('<Esc>')
  sleep(100)
  out.shown_new_line = type_and_wait('Go<CR><CR>def parse_times(rows):<CR>', 120000)
  snapshot('new_line')
  type_keys('<C-]>')
  sleep(200)
  snapshot('dismissed')
  -- Ask again and accept everything with <Tab>.
  -- Asked twice in a row: the first request is cancelled by the second, whose answer is shown.
  type_keys('<M-\\><M-\\>')
  out.shown_again = type_and_wait('', 120000)
  snapshot('before_tab')
  type_keys('<Tab>')
  sleep(200)
  snapshot('accept_all')
  -- <Tab> without a suggestion is a <Tab>.
  type_keys('<Esc>')
  sleep(100)
  vim.cmd('normal! Gdd')
  vim.api.nvim_buf_set_lines(0, -1, -1, false, { 'x = 1' })
  vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(0), 0 })
  type_keys('i<Tab>')
  sleep(100)
  snapshot('plain_tab')
  type_keys('<Esc>')
  sleep(100)
  -- :Fimble status / explain show floats; toggle flips the server's switch.
  vim.cmd('Fimble status')
  wait_for(function() return vim.bo.filetype == 'fimble' end, 10000)
  out.status = float_lines()
  vim.cmd('Fimble explain')
  wait_for(function() return vim.bo.filetype == 'fimble' end, 10000)
  out.explain = float_lines()
  -- :Fimble explain! runs `fimble explain` for the cursor in a terminal.
  vim.cmd('write')
  vim.api.nvim_win_set_cursor(0, { 8, 0 })
  vim.cmd('Fimble explain!')
  local explain_buf
  wait_for(function()
    for _, b in ipairs(vim.api.nvim_list_bufs()) do
      if vim.bo[b].filetype == 'fimble-explain' then
        explain_buf = b
        return vim.fn.join(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n'):find('suggestion:') ~= nil
      end
    end
    return false
  end, 180000)
  out.explain_cursor = explain_buf and vim.api.nvim_buf_get_lines(explain_buf, 0, -1, false) or vim.NIL
  if explain_buf then
    vim.cmd('bwipeout! ' .. explain_buf)
  end
  local client = require('fimble').client()
  vim.cmd('Fimble toggle')
  sleep(500)
  out.after_toggle = client:request_sync('workspace/executeCommand', { command = 'fimble.status' }, 10000, 0).result.enabled
  vim.cmd('Fimble toggle')
  sleep(500)
  out.after_second_toggle = client:request_sync('workspace/executeCommand', { command = 'fimble.status' }, 10000, 0).result.enabled
  finish()
end

-- The cursor rests at the end of a line in insert mode: the plugin says so (didFocus) and the server
-- starts the suggestion there; asking for it then needs no model.
function scenarios.focus()
  require('fimble').setup(vim.json.decode(vim.env.FIMBLE_SETUP))
  vim.cmd.edit(vim.env.FIMBLE_FILE)
  if not attached() then
    return finish('fimble never attached')
  end
  local client = require('fimble').client()
  local function status()
    local st = client:request_sync('workspace/executeCommand', { command = 'fimble.status' }, 10000, 0)
    return st and st.result or {}
  end
  wait_for(function()
    return (status().model or {}).state == 'ready'
  end, 300000)
  vim.api.nvim_win_set_cursor(0, { 8, 0 })
  type_keys('A')
  out.warmed = wait_for(function()
    local r = status().requests or {}
    return (r.warmed or 0) >= 1 and (r.completed or 0) >= 1
  end, 300000)
  out.before = status().requests
  out.shown = type_and_wait('<M-\\>', 120000)
  snapshot('asked')
  out.after = status()
  finish()
end

-- No ghost text: the suggestion is a completion item, reached through omnifunc (<C-x><C-o>).
function scenarios.omnifunc()
  require('fimble').setup(vim.json.decode(vim.env.FIMBLE_SETUP))
  vim.cmd.edit(vim.env.FIMBLE_FILE)
  if not attached() then
    return finish('fimble never attached')
  end
  out.mode = require('fimble').mode()
  out.omnifunc = vim.bo.omnifunc
  -- Ask once the model is loaded (before that the server answers with an empty list at once).
  local client = require('fimble').client()
  wait_for(function()
    local st = client:request_sync('workspace/executeCommand', { command = 'fimble.status' }, 10000, 0)
    return st and st.result and st.result.model.state ~= 'loading'
  end, 300000)
  vim.api.nvim_win_set_cursor(0, { 8, 0 })
  type_keys('Aappend(')
  sleep(300)
  type_keys('<C-x><C-o>')
  local items
  wait_for(function()
    items = vim.fn.complete_info({ 'items' }).items
    return vim.fn.pumvisible() == 1 and #items > 0
  end, 300000)
  out.items = items or {}
  snapshot('menu')
  type_keys('<C-y>')
  sleep(300)
  snapshot('accepted')
  finish()
end

vim.defer_fn(function()
  finish('the scenario did not finish in time; steps so far are above')
end, tonumber(vim.env.FIMBLE_TIMEOUT_MS or '540000'))

local co = coroutine.create(function()
  local ok, err = xpcall(scenarios[scenario], debug.traceback)
  if not ok then
    finish(err)
  end
end)
vim.schedule(function()
  coroutine.resume(co)
end)
