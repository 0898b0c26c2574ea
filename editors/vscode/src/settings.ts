/**
 * VS Code's `fimble.*` settings -> the server's settings object (fimble/server/settings.py).
 *
 * Only the keys the server knows are sent: it reports an unknown key as a problem, and `fimble.path`
 * or `fimble.trace` are the extension's own. An empty model means "the server's default", which the
 * server spells as an absent key.
 */

export type Get = (key: string) => unknown;

export interface ServerSettings {
  enable?: boolean;
  model?: string;
  threads?: number;
  maxTokens?: number;
  multiline?: string;
  debounceMs?: number;
  deadlineMs?: number;
  invokedDeadlineMs?: number;
  languages?: Record<string, boolean>;
  index?: { exclude: string[] };
  acceptanceLog?: boolean;
  prefixTokens?: number;
  suffixTokens?: number;
  contextTokens?: number;
  firstSuggestionMs?: number;
  firstPromptTokens?: number;
  kvStateMb?: number;
  speculative?: boolean;
}

const SCALARS = [
  'enable',
  'threads',
  'maxTokens',
  'multiline',
  'debounceMs',
  'deadlineMs',
  'invokedDeadlineMs',
  'acceptanceLog',
  'prefixTokens',
  'suffixTokens',
  'contextTokens',
  'firstSuggestionMs',
  'firstPromptTokens',
  'kvStateMb',
  'speculative',
] as const;

export function serverSettings(get: Get): ServerSettings {
  const out: Record<string, unknown> = {};
  for (const key of SCALARS) {
    const value = get(key);
    if (value !== undefined && value !== null) {
      out[key] = value;
    }
  }
  const model = get('model');
  if (typeof model === 'string' && model.trim()) {
    out.model = model.trim();
  }
  const languages = get('languages');
  if (languages && typeof languages === 'object' && !Array.isArray(languages)) {
    out.languages = { ...(languages as Record<string, boolean>) };
  }
  const exclude = get('index.exclude');
  if (Array.isArray(exclude)) {
    out.index = { exclude: [...exclude] };
  }
  return out as ServerSettings;
}
