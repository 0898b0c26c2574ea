// End-to-end test of the fimble VS Code extension in a real VS Code (code-server) driven through
// headless Chromium with playwright-core, offline. Called by test_vscode_e2e.py; also runnable alone:
//
//   VSCODE_TOOLS=$(tests/editors/vscode/setup.sh) FIMBLE_BIN=.venv/bin/fimble FIMBLE_MODEL=/path/model.gguf \
//   VSIX=editors/vscode/fimble.vsix ARTIFACTS=build/test-artifacts/vscode \
//   $(tests/editors/vscode/setup.sh --node)/node tests/editors/vscode/e2e.mjs
//
// Scenario: open a workspace whose .venv holds fimble (the extension finds it there), open a Python file,
// wait for the status bar to say "fimble ready", rest the cursor (didFocus: the server's status counts a
// suggestion started there), type, wait for fimble's ghost text, take a screenshot,
// accept with Tab, save, and check the file on disk and fimble's acceptance log (served, shown, accepted).
// Prints one JSON line with the result; exits non-zero on failure (artifacts: screenshots, logs).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name} (see the header of ${import.meta.url})`);
  return value;
};
const TOOLS = env('VSCODE_TOOLS');
const FIMBLE_BIN = path.resolve(env('FIMBLE_BIN'));
const MODEL = env('FIMBLE_MODEL');
const VSIX = path.resolve(env('VSIX'));
const ARTIFACTS = path.resolve(env('ARTIFACTS'));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const READY_TIMEOUT = Number(process.env.READY_TIMEOUT_MS || 180_000);
const GHOST_TIMEOUT = Number(process.env.GHOST_TIMEOUT_MS || 180_000);
// The first request in a file evaluates the whole prompt: seconds on an idle machine, more when shared.
const RETRY_MS = Number(process.env.RETRY_MS || 45_000);

const { chromium } = createRequire(path.join(TOOLS, 'package.json'))('playwright-core');
const CODE_SERVER = path.join(TOOLS, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
const NODE = process.execPath; // Node 24: code-server's native modules were built for it

const t0 = Date.now();
const timings = {};
const mark = (name) => { timings[name] = Date.now() - t0; log(`${name} at ${timings[name]} ms`); };
function log(message) { process.stderr.write(`vscode-e2e: ${message}\n`); }

const WORKSPACE_FILE = 'geometry.py';
const SOURCE = `import math


def circle_area(radius):
    """Area of a circle with the given radius."""
    return
`;
const LINE = 6; // 1-based line where we type
const TYPED = ' math.';

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function waitHttp(url, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${url} did not answer within ${ms} ms`);
}

function setUp(root) {
  const ws = path.join(root, 'workspace');
  const userData = path.join(root, 'user-data');
  const extensions = path.join(root, 'extensions');
  const home = path.join(root, 'fimble-home');
  for (const d of [ws, path.join(userData, 'User'), extensions, home]) fs.mkdirSync(d, { recursive: true });
  fs.writeFileSync(path.join(ws, WORKSPACE_FILE), SOURCE);
  // The project's virtualenv, where the extension looks before PATH.
  fs.mkdirSync(path.join(ws, '.venv', 'bin'), { recursive: true });
  fs.symlinkSync(FIMBLE_BIN, path.join(ws, '.venv', 'bin', 'fimble'));
  const settings = {
    'fimble.model': MODEL,
    'fimble.deadlineMs': 60000, // a shared 2-core machine can be slow; the test wants the whole line
    'fimble.multiline': 'never',
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'extensions.ignoreRecommendations': true,
    'workbench.enableExperiments': false,
    'workbench.startupEditor': 'none',
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'workbench.activityBar.location': 'hidden',
    'workbench.tips.enabled': false,
    'workbench.welcomePage.walkthroughs.openOnInstall': false,
    'security.workspace.trust.enabled': false,
    'chat.disableAIFeatures': true,
    'editor.inlineSuggest.enabled': true,
    'editor.quickSuggestions': { other: false, comments: false, strings: false },
    'editor.suggestOnTriggerCharacters': false,
    'editor.fontSize': 16,
    'files.watcherExclude': { '**/.venv/**': true },
    'files.exclude': { '**/.venv': true, '**/.vscode': true },
    'git.enabled': false,
    'window.zoomLevel': 0,
  };
  fs.writeFileSync(path.join(userData, 'User', 'settings.json'), JSON.stringify(settings, null, 2));
  const config = path.join(root, 'code-server.yaml');
  fs.writeFileSync(config, 'auth: none\n');
  return { root, ws, userData, extensions, home, config };
}

function codeServerEnv(dirs) {
  return {
    ...process.env,
    PATH: `${path.dirname(NODE)}:${process.env.PATH}`,
    FIMBLE_HOME: dirs.home,
    // code-server's own logs and heartbeat stay in the test's directory, not in ~/.local/share.
    XDG_DATA_HOME: path.join(dirs.root, 'xdg-data'),
    XDG_CONFIG_HOME: path.join(dirs.root, 'xdg-config'),
    // No extension gallery: nothing to query on a closed network.
    EXTENSIONS_GALLERY: JSON.stringify({ serviceUrl: '', itemUrl: '', resourceUrlTemplate: '' }),
  };
}

async function main() {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fimble-vscode-e2e-'));
  const dirs = setUp(root);
  const common = ['--config', dirs.config, '--user-data-dir', dirs.userData, '--extensions-dir', dirs.extensions];
  const install = spawnSync(NODE, [CODE_SERVER, ...common, '--install-extension', VSIX, '--force'], {
    env: codeServerEnv(dirs), encoding: 'utf8', timeout: 120_000,
  });
  if (install.status !== 0) throw new Error(`installing ${VSIX} failed:\n${install.stdout}\n${install.stderr}`);
  mark('extension_installed');

  const port = await freePort();
  const serverLog = fs.openSync(path.join(ARTIFACTS, 'code-server.log'), 'w');
  const server = spawn(NODE, [CODE_SERVER, ...common, '--bind-addr', `127.0.0.1:${port}`, '--auth', 'none',
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
    '--disable-getting-started-override', '--ignore-last-opened', dirs.ws], {
    env: codeServerEnv(dirs), stdio: ['ignore', serverLog, serverLog], detached: true,
  });
  let browser;
  let page;
  const result = { ok: false, timings };
  try {
    await waitHttp(`http://127.0.0.1:${port}/healthz`, 60_000);
    mark('code_server_up');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
    });
    page = await browser.newPage({ viewport: { width: 1100, height: 560 } });
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(dirs.ws)}`);
    await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
    mark('workbench_loaded');

    await openFile(page, WORKSPACE_FILE);
    mark('file_open');
    result.states = await waitReady(page);
    mark('fimble_ready');
    log(`status bar went through ${JSON.stringify(result.states)}`);

    // Cursor at the end of "    return": once it rests, the extension sends textDocument/didFocus and
    // the server starts the suggestion there (its status counts it as "warmed"). Then type: the
    // suggestion completes the expression.
    await goToLine(page, LINE);
    await page.keyboard.press('End');
    result.warmed = await waitWarmed(page, dirs.userData, 30_000);
    mark('focus_warmed');
    await goToLine(page, LINE);
    await page.keyboard.press('End');
    await page.keyboard.type(TYPED, { delay: 60 });
    const ghost = await waitGhost(page);
    mark('ghost_text');
    log(`ghost text: ${JSON.stringify(ghost)}`);
    result.ghost = ghost;
    await page.mouse.move(0, 0);
    await page.screenshot({ path: path.join(ARTIFACTS, 'vscode-ghost-text.png') });

    // Ctrl+Right (fimble: Accept the Next Word) takes the first word; Tab takes the rest.
    await page.keyboard.press('Control+ArrowRight');
    const rest = await waitGhostChange(page, ghost);
    log(`after accepting a word, the ghost text is ${JSON.stringify(rest)}`);
    result.rest = rest;
    if (rest) await page.keyboard.press('Tab'); // (a one-word suggestion is all taken by Ctrl+Right)
    await page.keyboard.press('Control+S');
    const expected = `    return${TYPED}${ghost}`.trimEnd();
    const line = await waitLine(path.join(dirs.ws, WORKSPACE_FILE), LINE, (l) => l.trimEnd() === expected, 15_000);
    mark('accepted_and_saved');
    result.line = line;
    await page.screenshot({ path: path.join(ARTIFACTS, 'vscode-accepted.png') });

    const wanted = rest ? ['served', 'shown', 'partial', 'accepted'] : ['served', 'shown', 'partial'];
    const events = await waitEvents(path.join(dirs.home, 'acceptance.jsonl'), wanted, 10_000);
    result.events = events;
    mark('signals_logged');

    // Explain at cursor: asks for a suggestion here, then writes the server's account to the output.
    await runCommand(page, 'fimble: Explain the Suggestion at the Cursor');
    await page.locator('.notification-toast', { hasText: 'fimble explain geometry.py:6:' }).first()
      .waitFor({ timeout: GHOST_TIMEOUT });
    mark('explained');

    // Reindex, then toggle automatic suggestions off: the status bar says so.
    await runCommand(page, 'fimble: Reindex Workspace');
    await page.locator('.notification-toast', { hasText: 'fimble: workspace reindexed' }).first()
      .waitFor({ timeout: 60_000 });
    mark('reindexed');
    await runCommand(page, 'fimble: Toggle Automatic Suggestions');
    await page.locator('[aria-label="fimble off"]').first().waitFor({ timeout: 30_000 });
    mark('toggled_off');

    // A broken fimble.path: the status bar turns into an error that says what to do.
    // (Workspace settings: fimble.path is machine-overridable, which remote user settings cannot set.)
    fs.mkdirSync(path.join(dirs.ws, '.vscode'), { recursive: true });
    fs.writeFileSync(path.join(dirs.ws, '.vscode', 'settings.json'), JSON.stringify({ 'fimble.path': '/nonexistent/fimble' }));
    const error = page.locator('[aria-label^="fimble error: fimble.path is set to /nonexistent/fimble"]').first();
    await error.waitFor({ timeout: 30_000 });
    result.error_label = await error.getAttribute('aria-label');
    mark('error_shown');
    result.ok = true;
  } catch (err) {
    result.error = String(err && err.stack ? err.stack : err);
    if (page) await page.screenshot({ path: path.join(ARTIFACTS, 'vscode-failure.png') }).catch(() => {});
  } finally {
    if (browser) await browser.close().catch(() => {});
    try { process.kill(-server.pid, 'SIGTERM'); } catch { /* already gone */ }
    copyLogs(dirs.userData, path.join(ARTIFACTS, 'vscode-logs'));
    fs.rmSync(root, { recursive: true, force: true, maxRetries: 3 });
  }
  result.timings.total = Date.now() - t0;
  fs.writeFileSync(path.join(ARTIFACTS, 'result.json'), JSON.stringify(result, null, 2));
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(result.ok ? 0 : 1);
}

async function openFile(page, name) {
  // The explorer shows the workspace; a click opens the file (Quick Open's Ctrl+P races the browser).
  const row = page.locator(`.explorer-folders-view .monaco-list-row[aria-label^="${name}"]`).first();
  await row.waitFor({ timeout: 60_000 });
  await row.click();
  await page.locator(`.tab[aria-label^="${name}"]`).first().waitFor({ timeout: 30_000 });
  await page.locator('.monaco-editor .view-lines').first().click();
}

// Waits for the status bar item to say "fimble ready"; returns the states it showed on the way.
async function waitReady(page) {
  const item = page.locator('.part.statusbar [aria-label^="fimble "]').first();
  const seen = [];
  const end = Date.now() + READY_TIMEOUT;
  while (Date.now() < end) {
    const label = await item.getAttribute('aria-label', { timeout: 1000 }).catch(() => null);
    const state = label && label.split(':')[0];
    if (state && seen[seen.length - 1] !== state) seen.push(state);
    if (state === 'fimble ready') return seen;
    await page.waitForTimeout(100);
  }
  throw new Error(`the status bar did not say "fimble ready" within ${READY_TIMEOUT} ms (it said ${JSON.stringify(seen)})`);
}

async function goToLine(page, line) {
  await page.keyboard.press('Control+G');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ timeout: 10_000 });
  await input.fill(`:${line}`);
  await page.keyboard.press('Enter');
}

async function ghostText(page) {
  const spans = page.locator('.monaco-editor span.ghost-text-decoration');
  if ((await spans.count()) === 0) return null;
  const texts = await spans.allInnerTexts();
  return texts.join('').replace(/\u00a0/g, ' ');
}

async function waitGhost(page) {
  const end = Date.now() + GHOST_TIMEOUT;
  let nextRetry = Date.now() + RETRY_MS;
  while (Date.now() < end) {
    const text = await ghostText(page);
    if (text && text.trim()) return text;
    if (Date.now() > nextRetry) {
      // A suggestion can be lost to a race (a keystroke cancelled it): ask again, as a user would.
      log('no ghost text yet: running "Trigger Inline Suggestion"');
      await runCommand(page, 'Trigger Inline Suggestion');
      nextRetry = Date.now() + RETRY_MS;
    }
    await page.waitForTimeout(200);
  }
  throw new Error(`no ghost text within ${GHOST_TIMEOUT} ms`);
}

async function waitGhostChange(page, before) {
  const end = Date.now() + 10_000;
  while (Date.now() < end) {
    const text = await ghostText(page);
    if (text !== null && text !== before) return text;
    if (text === null && (await page.locator('.monaco-editor .view-line', { hasText: before.trim() }).count()) > 0) {
      return ''; // the whole suggestion was one word: it is in the buffer now
    }
    await page.waitForTimeout(100);
  }
  throw new Error(`the ghost text did not change after Ctrl+Right (still ${JSON.stringify(before)})`);
}

async function runCommand(page, title) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ timeout: 10_000 });
  await input.fill(`>${title}`);
  await page.locator('.quick-input-list .monaco-list-row').first().waitFor({ timeout: 10_000 });
  await page.keyboard.press('Enter');
}

async function waitLine(file, line, ok, ms) {
  const end = Date.now() + ms;
  let last = '';
  while (Date.now() < end) {
    last = fs.readFileSync(file, 'utf8').split('\n')[line - 1] ?? '';
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`line ${line} of ${path.basename(file)} is ${JSON.stringify(last)} after accepting`);
}

async function waitEvents(file, wanted, ms) {
  const end = Date.now() + ms;
  let seen = [];
  while (Date.now() < end) {
    seen = fs.existsSync(file)
      ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l).event)
      : [];
    if (wanted.every((w) => seen.includes(w))) return seen;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`acceptance log has ${JSON.stringify(seen)}, expected ${JSON.stringify(wanted)}`);
}

// Runs "fimble: Show Status" (which writes the server's status to the fimble output channel, logged
// under userData/logs) until the status counts a suggestion started by didFocus; returns that count.
async function waitWarmed(page, userData, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    await new Promise((r) => setTimeout(r, 1000));
    await runCommand(page, 'fimble: Show Status');
    await new Promise((r) => setTimeout(r, 500));
    const counts = findFiles(path.join(userData, 'logs'), 'fimble.log')
      .flatMap((f) => [...fs.readFileSync(f, 'utf8').matchAll(/"warmed": (\d+)/g)].map((m) => Number(m[1])));
    const warmed = Math.max(0, ...counts);
    if (warmed > 0) return warmed;
  }
  throw new Error('the server never started a suggestion where the cursor rested (no didFocus?)');
}

function findFiles(dir, name) {
  let out = [];
  let entries = [];
  try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return out; }
  for (const e of entries) {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) out = out.concat(findFiles(full, name));
    else if (e.name === name) out.push(full);
  }
  return out;
}

function copyLogs(userData, to) {
  try {
    fs.cpSync(path.join(userData, 'logs'), to, { recursive: true });
  } catch { /* no logs */ }
}

main().catch((err) => {
  log(String(err && err.stack ? err.stack : err));
  process.exit(2);
});
