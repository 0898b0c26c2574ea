import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serverSettings } from '../src/settings';

const defaults: Record<string, unknown> = {
  path: '/opt/fimble',
  model: '',
  threads: 0,
  maxTokens: 64,
  multiline: 'auto',
  debounceMs: 0,
  deadlineMs: 4000,
  enable: true,
  languages: { '*': true },
  'index.exclude': [],
  acceptanceLog: true,
  'trace.server': 'off',
};

test('only the keys fimble/server/settings.py knows, in its camelCase shape', () => {
  const got = serverSettings((k) => defaults[k]);
  assert.deepEqual(got, {
    enable: true,
    threads: 0,
    maxTokens: 64,
    multiline: 'auto',
    debounceMs: 0,
    deadlineMs: 4000,
    acceptanceLog: true,
    languages: { '*': true },
    index: { exclude: [] },
  });
});

test('an empty model means the server default (no key); a name or path is sent trimmed', () => {
  assert.equal('model' in serverSettings((k) => defaults[k]), false);
  const got = serverSettings((k) => (k === 'model' ? ' qwen2.5-coder-0.5b ' : defaults[k]));
  assert.equal(got.model, 'qwen2.5-coder-0.5b');
});

test('per-language switches and index excludes pass through', () => {
  const values: Record<string, unknown> = { languages: { markdown: false, '*': true }, 'index.exclude': ['**/vendor/**'] };
  const got = serverSettings((k) => values[k]);
  assert.deepEqual(got, { languages: { markdown: false, '*': true }, index: { exclude: ['**/vendor/**'] } });
});

test('budget, warm-up, KV-state and speculative settings pass through when set', () => {
  const values: Record<string, unknown> = {
    prefixTokens: 1024,
    suffixTokens: 32,
    contextTokens: 512,
    firstSuggestionMs: 0,
    firstPromptTokens: 512,
    invokedDeadlineMs: 30000,
    kvStateMb: 256,
    speculative: false,
  };
  assert.deepEqual(serverSettings((k) => values[k]), values);
});
