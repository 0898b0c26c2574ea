/**
 * Shown / partially accepted signals back to the server (fimble/server/acceptance.py), which logs
 * them locally in acceptance.jsonl. Full accepts need nothing here: the item's own `fimble.accept`
 * command runs when VS Code inserts the whole suggestion.
 *
 * VS Code's stable API has no "shown" callback (it is a proposed API), so a suggestion counts as shown
 * when VS Code receives it for a request it did not cancel: the ghost text is then on screen.
 */
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';

export const DID_SHOW = 'textDocument/didShowCompletion';
export const DID_PARTIALLY_ACCEPT = 'textDocument/didPartiallyAcceptCompletion';

interface WireItem {
  insertText: string;
  command?: { title: string; command: string; arguments?: unknown[] };
}

export function wireItem(item: vscode.InlineCompletionItem): WireItem | undefined {
  const cmd = item.command;
  if (!cmd || cmd.command !== 'fimble.accept') {
    return undefined; // not one of ours (or no id to tie the event to)
  }
  const text = typeof item.insertText === 'string' ? item.insertText : item.insertText.value;
  return { insertText: text, command: { title: cmd.title, command: cmd.command, arguments: cmd.arguments } };
}

export class Signals {
  private last: WireItem | undefined;
  private acceptedSoFar = 0; // characters of `last` accepted word by word or line by line

  constructor(private readonly client: () => LanguageClient | undefined) {}

  shown(items: readonly vscode.InlineCompletionItem[]): void {
    const first = items.length > 0 ? wireItem(items[0]) : undefined;
    if (!first) {
      return;
    }
    this.last = first;
    this.acceptedSoFar = 0;
    void this.client()?.sendNotification(DID_SHOW, { item: first });
  }

  /** Runs VS Code's accept-next-word/line and reports how many characters it inserted. */
  async acceptPart(command: string): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    const item = this.last;
    let inserted = 0;
    const listener = vscode.workspace.onDidChangeTextDocument((e) => {
      if (editor && e.document === editor.document) {
        inserted += e.contentChanges.reduce((n, c) => n + c.text.length, 0);
      }
    });
    try {
      await vscode.commands.executeCommand(command);
    } finally {
      listener.dispose();
    }
    if (item && item === this.last && inserted > 0) {
      this.acceptedSoFar += inserted; // like Copilot's: the length accepted so far, not this step's
      void this.client()?.sendNotification(DID_PARTIALLY_ACCEPT, { item, acceptedLength: this.acceptedSoFar });
    }
  }
}
