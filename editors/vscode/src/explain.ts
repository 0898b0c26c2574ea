/**
 * "Explain at cursor" as text: what the server did for the last request (the one just made at the
 * cursor), from `fimble.status`. Pure, so the wording is unit-tested.
 */

export interface Explained {
  title: string;
  lines: string[];
}

type Dict = Record<string, unknown>;

function dict(v: unknown): Dict {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Dict) : {};
}

const OUTCOMES: Record<string, string> = {
  served: 'a suggestion was served',
  empty: 'the model proposed nothing here (an empty or whitespace-only continuation)',
  model_loading: 'the model is still loading: try again when the status bar shows fimble ready',
  model_error: 'the model failed to load: see the status bar tooltip for the fix',
  superseded: 'a newer request (another keystroke) replaced this one',
  cancelled: 'VS Code cancelled the request (the cursor moved or the text changed)',
  error: 'the completion failed',
};

export function explain(status: unknown, where: string): Explained {
  const s = dict(status);
  const last = dict(s.last);
  const model = dict(s.model);
  const lines: string[] = [];
  lines.push(`model: ${model.name ?? '?'} (${model.state ?? '?'})${model.error ? ` - ${model.error}` : ''}`);
  if (Object.keys(last).length === 0) {
    lines.push('no request has reached the server yet');
    return { title: `fimble explain ${where}`, lines };
  }
  const outcome = String(last.outcome ?? '?');
  lines.push(`request: ${last.trigger ?? '?'} for ${last.path ?? '?'}`);
  lines.push(`outcome: ${outcome} - ${OUTCOMES[outcome] ?? ''}`.trimEnd());
  if (last.error) {
    lines.push(`error: ${last.error}`);
  }
  if (last.deadline_hit) {
    lines.push('the deadline (fimble.deadlineMs) was hit: only whole lines were kept');
  }
  if (last.context_files !== undefined) {
    lines.push(`repository context: ${last.context_files} file(s), chosen in ${last.context_ms} ms`);
  }
  const engine = dict(last.engine);
  for (const [key, value] of Object.entries(engine)) {
    lines.push(`  ${key}: ${typeof value === 'object' ? JSON.stringify(value) : String(value)}`);
  }
  if (last.chars !== undefined) {
    lines.push(`suggestion: ${last.chars} characters`);
  }
  lines.push(`total: ${last.total_ms} ms`);
  const cache = dict(s.cache);
  if (cache.kv_hit_rate !== undefined) {
    lines.push(`KV cache hit rate so far: ${Math.round(Number(cache.kv_hit_rate) * 100)}%`);
  }
  return { title: `fimble explain ${where}`, lines };
}
