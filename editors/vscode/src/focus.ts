/**
 * Tells the server where the cursor went (`textDocument/didFocus` with a `position`, fimble's
 * extension of Copilot's notification), once the user switches editors or stops moving the cursor
 * for a moment. The server starts the suggestion there while the user reads, so the first
 * keystroke finds it ready (or the prompt already evaluated) instead of paying for the whole
 * prompt. The server ignores places it already has an answer for, so typing costs nothing extra.
 */
import * as vscode from 'vscode';
import type { LanguageClient } from 'vscode-languageclient/node';

export const DID_FOCUS = 'textDocument/didFocus';
const SETTLE_MS = 300; // cursor keys held down or a drag: wait until the cursor rests

export class Focus implements vscode.Disposable {
  private timer: NodeJS.Timeout | undefined;
  private readonly subscriptions: vscode.Disposable[];

  constructor(private readonly client: () => LanguageClient | undefined) {
    this.subscriptions = [
      vscode.window.onDidChangeActiveTextEditor((editor) => this.schedule(editor)),
      vscode.window.onDidChangeTextEditorSelection((e) => this.schedule(e.textEditor)),
    ];
  }

  private schedule(editor: vscode.TextEditor | undefined): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => this.send(editor), SETTLE_MS);
  }

  private send(editor: vscode.TextEditor | undefined): void {
    this.timer = undefined;
    const client = this.client();
    if (!client || !editor || editor !== vscode.window.activeTextEditor || !editor.selection.isEmpty) {
      return;
    }
    const scheme = editor.document.uri.scheme;
    if (scheme !== 'file' && scheme !== 'untitled') {
      return;
    }
    const c2p = client.code2ProtocolConverter;
    void client
      .sendNotification(DID_FOCUS, {
        textDocument: { uri: c2p.asUri(editor.document.uri) },
        position: c2p.asPosition(editor.selection.active),
      })
      .catch(() => undefined); // not running (starting or restarting): the next move tells again
  }

  dispose(): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.subscriptions.forEach((s) => s.dispose());
  }
}
