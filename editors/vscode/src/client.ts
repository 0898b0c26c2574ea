/**
 * The language client: starts `fimble serve` over stdio, keeps its settings in sync, reports
 * progress and status to the status bar, and sends the shown signal from the inline provider.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  WorkDoneProgress,
  WorkDoneProgressCreateRequest,
} from 'vscode-languageclient/node';
import { locate, Located, NotFound } from './locate';
import { serverSettings } from './settings';
import { Focus } from './focus';
import { Signals } from './signals';
import { ServerStatus, StatusModel } from './status';

const POLL_MS = 1000;

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

export function currentSettings(): ReturnType<typeof serverSettings> {
  const config = vscode.workspace.getConfiguration('fimble');
  return serverSettings((key) => config.get(key));
}

export class Fimble implements vscode.Disposable {
  client: LanguageClient | undefined;
  located: Located | undefined;
  readonly model = new StatusModel();
  readonly signals = new Signals(() => this.client);
  private readonly focus = new Focus(() => this.client);
  readonly output = vscode.window.createOutputChannel('fimble', { log: true });
  private readonly item: vscode.StatusBarItem;
  private poll: NodeJS.Timeout | undefined;
  private inlineWaiters: (() => void)[] = [];

  constructor() {
    this.item = vscode.window.createStatusBarItem('fimble.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'fimble';
    this.item.command = 'fimble.showStatus';
    this.render();
    this.item.show();
  }

  render(): void {
    const view = this.model.view();
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.accessibilityInformation = { label: view.label, role: 'button' };
    this.item.backgroundColor =
      view.state === 'error' ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
  }

  async start(): Promise<void> {
    this.model.starting();
    this.render();
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    try {
      this.located = locate({
        configured: vscode.workspace.getConfiguration('fimble').get<string>('path') ?? '',
        folders,
        envPath: process.env.PATH ?? '',
        home: os.homedir(),
        platform: process.platform,
        isExecutable,
      });
    } catch (err) {
      if (!(err instanceof NotFound)) {
        throw err;
      }
      this.fail(err.message);
      return;
    }
    this.output.appendLine(`fimble: starting ${this.located.command} serve (found via ${this.located.source})`);
    const serverOptions: ServerOptions = {
      command: this.located.command,
      args: ['serve'],
      options: { cwd: folders[0] },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
      outputChannel: this.output,
      initializationOptions: currentSettings(),
      middleware: {
        // The server asks for section "fimble": answer with its own keys only (not fimble.path/trace).
        workspace: {
          configuration: (params, _token, _next) => params.items.map((i) => (i.section === 'fimble' ? currentSettings() : null)),
        },
        provideInlineCompletionItems: async (document, position, context, token, next) => {
          const result = await next(document, position, context, token);
          const items = Array.isArray(result) ? result : result?.items ?? [];
          if (!token.isCancellationRequested) {
            this.signals.shown(items);
          }
          this.inlineWaiters.splice(0).forEach((w) => w());
          return result;
        },
      },
    };
    const client = new LanguageClient('fimble', 'fimble', serverOptions, clientOptions);
    this.client = client;
    client.onDidChangeState((e) => {
      if (this.client !== client) {
        return; // a client we replaced (restart) or stopped ourselves
      }
      if (e.newState === State.Stopped) {
        this.fail('the fimble server stopped: see the fimble output channel, then run "fimble: Restart the Server"');
      } else if (e.newState === State.Running && e.oldState === State.Starting && this.model.view().state === 'error') {
        // vscode-languageclient restarted a crashed server by itself: follow it again.
        this.model.starting();
        this.render();
        this.startPolling();
      }
    });
    try {
      await client.start();
    } catch (err) {
      this.fail(`fimble serve failed to start (${this.located.command}): ${String(err)}`);
      return;
    }
    this.watchProgress(client);
    this.startPolling();
  }

  /** Our own handler for the server's progress bars, so they show in the fimble status item. */
  private watchProgress(client: LanguageClient): void {
    client.onRequest(WorkDoneProgressCreateRequest.type, (params) => {
      const token = String(params.token);
      const sub = client.onProgress(WorkDoneProgress.type, params.token, (value) => {
        if (value.kind === 'begin') {
          this.model.progressBegin(token, value.title, value.message);
        } else if (value.kind === 'report') {
          this.model.progressReport(token, value.message);
        } else {
          this.model.progressEnd(token);
          sub.dispose();
          void this.refresh();
        }
        this.render();
      });
      this.startPolling();
    });
  }

  private startPolling(): void {
    if (this.poll) {
      return;
    }
    const tick = async (): Promise<void> => {
      await this.refresh();
      this.poll = this.model.settled() ? undefined : setTimeout(() => void tick(), POLL_MS);
    };
    this.poll = setTimeout(() => void tick(), 0);
  }

  /** Ask the server for its status and show it; returns the raw answer. */
  async refresh(): Promise<ServerStatus | undefined> {
    const client = this.client;
    if (!client || client.state !== State.Running) {
      return undefined;
    }
    try {
      const status = (await client.sendRequest(ExecuteCommandRequest.type, {
        command: 'fimble.status',
        arguments: [],
      })) as ServerStatus;
      this.model.serverStatus(status);
      this.render();
      return status;
    } catch (err) {
      this.output.appendLine(`fimble: status failed: ${String(err)}`);
      return undefined;
    }
  }

  async command(name: string, ...args: unknown[]): Promise<unknown> {
    if (!this.client || this.client.state !== State.Running) {
      throw new Error(this.model.view().tooltip);
    }
    return this.client.sendRequest(ExecuteCommandRequest.type, { command: name, arguments: args });
  }

  /** Resolves after the next inline completion request finishes (or after `ms`). */
  nextInline(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.inlineWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  pushSettings(): void {
    void this.client?.sendNotification(DidChangeConfigurationNotification.type, {
      settings: { fimble: currentSettings() },
    });
    void this.refresh();
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (this.poll) {
      clearTimeout(this.poll);
      this.poll = undefined;
    }
    if (client && client.state === State.Running) {
      await client.stop(5000).catch(() => undefined);
    }
  }

  private fail(message: string): void {
    this.output.appendLine(`fimble: ${message}`);
    this.model.startFailed(message);
    this.render();
    void vscode.window.showErrorMessage(message, 'Open Settings', 'Show Log').then((choice) => {
      if (choice === 'Open Settings') {
        void vscode.commands.executeCommand('workbench.action.openSettings', 'fimble.path');
      } else if (choice === 'Show Log') {
        this.output.show();
      }
    });
  }

  dispose(): void {
    void this.stop();
    this.focus.dispose();
    this.item.dispose();
    this.output.dispose();
  }
}
