/**
 * Where the `fimble` executable is. Pure (file checks are injected) so it is unit-tested without VS Code.
 *
 * Order: the `fimble.path` setting; the workspace's own virtualenv (a project that pins fimble in its
 * dev dependencies gets that version); `fimble` on PATH. Each miss is remembered so the error can say
 * where we looked and what to do.
 */
import * as path from 'path';

export interface Located {
  command: string;
  source: 'setting' | 'workspace' | 'PATH';
}

export interface LocateInput {
  configured: string; // fimble.path, '' when unset
  folders: string[]; // workspace folder paths
  envPath: string; // process.env.PATH
  home: string;
  platform: NodeJS.Platform;
  isExecutable: (file: string) => boolean;
}

export class NotFound extends Error {}

const VENV_DIRS = ['.venv', 'venv', 'env'];

function binName(platform: NodeJS.Platform): string[] {
  return platform === 'win32' ? ['fimble.exe', 'fimble.cmd', 'fimble'] : ['fimble'];
}

function venvBin(platform: NodeJS.Platform): string {
  return platform === 'win32' ? 'Scripts' : 'bin';
}

export function expand(value: string, home: string, folder: string | undefined): string {
  let out = value.trim();
  if (out === '~' || out.startsWith('~/')) {
    out = path.join(home, out.slice(1));
  }
  if (folder !== undefined) {
    out = out.replace(/\$\{workspaceFolder\}/g, folder);
  }
  return out;
}

export function locate(input: LocateInput): Located {
  const { configured, folders, platform, isExecutable } = input;
  if (configured.trim()) {
    const file = expand(configured, input.home, folders[0]);
    const candidate = path.isAbsolute(file) || folders.length === 0 ? file : path.join(folders[0], file);
    if (isExecutable(candidate)) {
      return { command: candidate, source: 'setting' };
    }
    throw new NotFound(
      `fimble.path is set to ${configured} but ${candidate} is not an executable file: ` +
        'fix the setting or clear it to use the workspace .venv or PATH',
    );
  }
  for (const folder of folders) {
    for (const venv of VENV_DIRS) {
      for (const name of binName(platform)) {
        const candidate = path.join(folder, venv, venvBin(platform), name);
        if (isExecutable(candidate)) {
          return { command: candidate, source: 'workspace' };
        }
      }
    }
  }
  const sep = platform === 'win32' ? ';' : ':';
  for (const dir of input.envPath.split(sep).filter(Boolean)) {
    for (const name of binName(platform)) {
      const candidate = path.join(dir, name);
      if (isExecutable(candidate)) {
        return { command: candidate, source: 'PATH' };
      }
    }
  }
  throw new NotFound(
    'fimble is not installed: run `pip install fimble` (or install it into the workspace .venv), ' +
      'or set fimble.path to the fimble executable',
  );
}
