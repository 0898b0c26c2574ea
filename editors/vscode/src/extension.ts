/**
 * fimble for VS Code: ghost-text suggestions from the local fimble language server.
 *
 * VS Code command ids differ from the server's (`fimble.status`, ...): vscode-languageclient
 * registers the server's commands under their own names, so ours wrap them.
 */
import * as vscode from 'vscode';
import { Fimble } from './client';
import { explain } from './explain';

let fimble: Fimble | undefined;

function reportError(err: unknown): void {
  void vscode.window.showErrorMessage(`fimble: ${err instanceof Error ? err.message : String(err)}`);
}

function guarded(fn: () => Promise<void>): () => Promise<void> {
  return async () => {
    try {
      await fn();
    } catch (err) {
      reportError(err);
    }
  };
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const f = new Fimble();
  fimble = f;
  context.subscriptions.push(f);
  const register = (id: string, fn: () => Promise<void>): void => {
    context.subscriptions.push(vscode.commands.registerCommand(id, guarded(fn)));
  };

  register('fimble.showStatus', async () => {
    const status = await f.refresh();
    const view = f.model.view();
    f.output.appendLine(`fimble status: ${view.tooltip}`);
    if (status) {
      f.output.appendLine(JSON.stringify(status, null, 2));
    }
    const choice = await vscode.window.showInformationMessage(view.tooltip, 'Details', 'Toggle', 'Reindex');
    if (choice === 'Details') {
      f.output.show(true);
    } else if (choice === 'Toggle') {
      await vscode.commands.executeCommand('fimble.toggleSuggestions');
    } else if (choice === 'Reindex') {
      await vscode.commands.executeCommand('fimble.reindexWorkspace');
    }
  });
  register('fimble.toggleSuggestions', async () => {
    await f.command('fimble.toggle'); // the server says "automatic suggestions on/off" itself
    await f.refresh();
  });
  register('fimble.reindexWorkspace', async () => {
    const result = (await f.command('fimble.reindex')) as { error?: string } | undefined;
    await f.refresh();
    if (result?.error === undefined) {
      void vscode.window.showInformationMessage('fimble: workspace reindexed');
    }
  });
  register('fimble.explainAtCursor', async () => {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      throw new Error('open a file and put the cursor where you want a suggestion explained');
    }
    const pos = editor.selection.active;
    const where = `${vscode.workspace.asRelativePath(editor.document.uri)}:${pos.line + 1}:${pos.character + 1}`;
    const done = f.nextInline(30_000);
    await vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
    await done;
    const status = await f.command('fimble.status');
    const out = explain(status, where);
    f.output.appendLine(`\n${out.title}`);
    out.lines.forEach((l) => f.output.appendLine(`  ${l}`));
    f.output.show(true);
    if (f.located && editor.document.uri.scheme === 'file') {
      const choice = await vscode.window.showInformationMessage(
        `${out.title}: see the fimble output. The prompt's parts, token by token, come from \`fimble explain\`.`,
        'Run fimble explain',
      );
      if (choice) {
        const terminal = vscode.window.createTerminal('fimble explain');
        const file = editor.document.uri.fsPath;
        terminal.sendText(`"${f.located.command}" explain "${file}:${pos.line + 1}:${pos.character + 1}"`);
        terminal.show();
      }
    }
  });
  register('fimble.acceptWord', () => f.signals.acceptPart('editor.action.inlineSuggest.acceptNextWord'));
  register('fimble.acceptLine', () => f.signals.acceptPart('editor.action.inlineSuggest.acceptNextLine'));
  register('fimble.restartServer', () => f.restart());

  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('fimble.path')) {
        void f.restart();
      } else if (e.affectsConfiguration('fimble')) {
        f.pushSettings();
      }
    }),
  );
  await f.start();
}

export async function deactivate(): Promise<void> {
  await fimble?.stop();
  fimble = undefined;
}
