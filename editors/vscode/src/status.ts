/**
 * What the status bar item says, from the server's `fimble.status` answer and its `$/progress`.
 * Pure: the extension feeds events in and renders `view()`, the unit tests do the same.
 */

export type State = 'starting' | 'loading' | 'indexing' | 'ready' | 'off' | 'error';

export interface View {
  state: State;
  text: string; // with a codicon, e.g. "$(check) fimble"
  tooltip: string;
  /** Accessible name (errors include the fix); the end-to-end test waits for "fimble ready". */
  label: string;
}

interface ModelStatus {
  name?: string;
  state?: string;
  error?: string;
}

export interface ServerStatus {
  enabled?: boolean;
  model?: ModelStatus;
  index?: { configured?: boolean; indexes?: { ready?: boolean; files?: number; error?: string }[]; errors?: string[] };
}

export class StatusModel {
  private status: ServerStatus | undefined;
  private progress = new Map<string, { title: string; message?: string }>(); // by progress token
  private failure: string | undefined; // the server could not start or died

  startFailed(message: string): void {
    this.failure = message;
  }

  starting(): void {
    this.failure = undefined;
    this.status = undefined;
    this.progress.clear();
  }

  serverStatus(status: ServerStatus): void {
    this.status = status;
  }

  progressBegin(token: string, title: string, message?: string): void {
    this.progress.set(token, { title, message });
  }

  progressReport(token: string, message?: string): void {
    const current = this.progress.get(token);
    if (current !== undefined && message) {
      this.progress.set(token, { ...current, message });
    }
  }

  progressEnd(token: string): void {
    this.progress.delete(token);
  }

  /** True once nothing is left to wait for, so polling can stop. */
  settled(): boolean {
    const s = this.view().state;
    return s === 'ready' || s === 'off' || s === 'error';
  }

  private texts(): string[] {
    return [...this.progress.values()].map((p) => (p.message ? `${p.title}: ${p.message}` : p.title));
  }

  view(): View {
    if (this.failure) {
      return { state: 'error', text: '$(error) fimble', tooltip: this.failure, label: `fimble error: ${this.failure}` };
    }
    const model = this.status?.model;
    if (model?.state === 'error') {
      const fix = model.error ?? 'the model failed to load: see the fimble output channel';
      return { state: 'error', text: '$(error) fimble', tooltip: fix, label: `fimble error: ${fix}` };
    }
    if (!this.status || model?.state === 'loading') {
      const what = this.texts().find((p) => p.includes('model')) ?? `loading model ${model?.name ?? ''}`.trim();
      return {
        state: this.status ? 'loading' : 'starting',
        text: '$(loading~spin) fimble',
        tooltip: this.status ? what : 'starting fimble serve',
        label: this.status ? 'fimble loading' : 'fimble starting',
      };
    }
    const indexing = this.texts().find((p) => p.includes('index'));
    const idx = this.status.index;
    const notReady = (idx?.indexes ?? []).filter((i) => !i.ready && !i.error);
    const indexNote = idx?.errors?.length ? `\nindex: ${idx.errors[idx.errors.length - 1]}` : '';
    if (indexing || notReady.length > 0) {
      const files = (idx?.indexes ?? []).reduce((n, i) => n + (i.files ?? 0), 0);
      const text = indexing ?? `fimble: indexing, ${files} files so far`;
      return {
        state: 'indexing',
        text: '$(sync~spin) fimble',
        tooltip: `${text}\nsuggestions work meanwhile, without repository context${indexNote}`,
        label: 'fimble indexing',
      };
    }
    const files = (idx?.indexes ?? []).reduce((n, i) => n + (i.files ?? 0), 0);
    const detail = `model ${model?.name ?? 'default'}, ${files} files indexed${indexNote}`;
    if (this.status.enabled === false) {
      return {
        state: 'off',
        text: '$(circle-slash) fimble',
        tooltip: `automatic suggestions off (fimble: Toggle Automatic Suggestions); ${detail}`,
        label: 'fimble off',
      };
    }
    return { state: 'ready', text: '$(check) fimble', tooltip: `fimble ready: ${detail}`, label: 'fimble ready' };
  }
}
