import assert from 'node:assert/strict';
import { test } from 'node:test';
import { expand, locate, LocateInput, NotFound } from '../src/locate';

function input(executables: string[], over: Partial<LocateInput> = {}): LocateInput {
  const set = new Set(executables);
  return {
    configured: '',
    folders: ['/ws'],
    envPath: '/usr/local/bin:/usr/bin',
    home: '/home/u',
    platform: 'linux',
    isExecutable: (f) => set.has(f),
    ...over,
  };
}

test('the setting wins over the workspace venv and PATH', () => {
  const got = locate(input(['/opt/fimble', '/ws/.venv/bin/fimble', '/usr/bin/fimble'], { configured: '/opt/fimble' }));
  assert.deepEqual(got, { command: '/opt/fimble', source: 'setting' });
});

test('a relative or ~ setting is resolved against the workspace or home', () => {
  assert.equal(locate(input(['/ws/tools/fimble'], { configured: 'tools/fimble' })).command, '/ws/tools/fimble');
  assert.equal(locate(input(['/home/u/bin/fimble'], { configured: '~/bin/fimble' })).command, '/home/u/bin/fimble');
  assert.equal(expand('${workspaceFolder}/x', '/h', '/ws'), '/ws/x');
});

test('a setting that points nowhere is an error naming it, not a silent fallback', () => {
  assert.throws(() => locate(input(['/usr/bin/fimble'], { configured: '/nope' })), (err: Error) => {
    assert.ok(err instanceof NotFound);
    assert.match(err.message, /fimble\.path is set to \/nope/);
    return true;
  });
});

test('the workspace .venv comes before PATH', () => {
  const got = locate(input(['/ws/.venv/bin/fimble', '/usr/bin/fimble']));
  assert.deepEqual(got, { command: '/ws/.venv/bin/fimble', source: 'workspace' });
});

test('PATH in order when no venv has fimble', () => {
  const got = locate(input(['/usr/bin/fimble', '/usr/local/bin/fimble']));
  assert.deepEqual(got, { command: '/usr/local/bin/fimble', source: 'PATH' });
});

test('Windows venvs use Scripts\\fimble.exe', () => {
  const got = locate(input(['/ws/.venv/Scripts/fimble.exe'], { platform: 'win32', envPath: '' }));
  assert.equal(got.source, 'workspace');
});

test('nothing found says how to install it', () => {
  assert.throws(() => locate(input([])), /pip install fimble.*fimble\.path/);
});
