import assert from 'node:assert/strict';
import { test } from 'node:test';
import { explain } from '../src/explain';

test('the last request, its outcome in words, and its engine numbers', () => {
  const status = {
    model: { name: 'qwen2.5-coder-1.5b', state: 'ready' },
    last: {
      path: '/ws/a.py', trigger: 'invoked', outcome: 'served', context_ms: 3.2, context_files: 2,
      engine: { tokens_evaluated: 40, tokens_reused: 900 }, chars: 17, total_ms: 812,
    },
    cache: { kv_hit_rate: 0.91 },
  };
  const out = explain(status, 'a.py:6:17');
  assert.equal(out.title, 'fimble explain a.py:6:17');
  assert.ok(out.lines.includes('outcome: served - a suggestion was served'));
  assert.ok(out.lines.includes('repository context: 2 file(s), chosen in 3.2 ms'));
  assert.ok(out.lines.includes('  tokens_evaluated: 40'));
  assert.ok(out.lines.includes('KV cache hit rate so far: 91%'));
});

test('before any request', () => {
  const out = explain({ model: { name: 'm', state: 'loading' } }, 'a.py:1:1');
  assert.deepEqual(out.lines, ['model: m (loading)', 'no request has reached the server yet']);
});
