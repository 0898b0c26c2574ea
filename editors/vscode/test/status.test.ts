import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StatusModel } from '../src/status';

const ready = {
  enabled: true,
  model: { name: 'qwen2.5-coder-1.5b', state: 'ready' },
  index: { configured: true, indexes: [{ ready: true, files: 12 }] },
};

test('starting, then loading with the progress message, then ready', () => {
  const m = new StatusModel();
  m.starting();
  assert.equal(m.view().state, 'starting');
  m.progressBegin('t1', 'fimble', 'loading model qwen2.5-coder-1.5b');
  m.serverStatus({ ...ready, model: { name: 'qwen2.5-coder-1.5b', state: 'loading' } });
  assert.equal(m.view().state, 'loading');
  assert.equal(m.view().tooltip, 'fimble: loading model qwen2.5-coder-1.5b');
  m.progressEnd('t1');
  m.serverStatus(ready);
  const v = m.view();
  assert.equal(v.state, 'ready');
  assert.equal(v.label, 'fimble ready');
  assert.match(v.tooltip, /12 files indexed/);
  assert.ok(m.settled());
});

test('indexing progress shows while the model is ready', () => {
  const m = new StatusModel();
  m.serverStatus(ready);
  m.progressBegin('t2', 'fimble: indexing', 'indexing the workspace');
  m.progressReport('t2', '40 files indexed so far');
  assert.equal(m.view().state, 'indexing');
  assert.match(m.view().tooltip, /^fimble: indexing: 40 files indexed so far/);
  assert.equal(m.settled(), false);
});

test('a model error shows the server fix', () => {
  const m = new StatusModel();
  const error = 'model qwen2.5-coder-1.5b is not downloaded: run fimble models pull qwen2.5-coder-1.5b';
  m.serverStatus({ ...ready, model: { name: 'x', state: 'error', error } });
  assert.deepEqual([m.view().state, m.view().tooltip], ['error', error]);
  assert.equal(m.view().label, `fimble error: ${error}`); // screen readers (and the e2e test) hear the fix
  assert.ok(m.settled());
});

test('a server that cannot start is an error until the next start', () => {
  const m = new StatusModel();
  m.startFailed('fimble is not installed: run `pip install fimble`');
  assert.equal(m.view().state, 'error');
  m.starting();
  assert.equal(m.view().state, 'starting');
});

test('toggled off', () => {
  const m = new StatusModel();
  m.serverStatus({ ...ready, enabled: false });
  assert.equal(m.view().state, 'off');
});
