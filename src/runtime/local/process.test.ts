import { describe, expect, it } from 'vitest';
import {
  DEFAULT_PATH,
  machineArgv,
  machineCwd,
  machineEnv,
  normalizeSignal,
  stopSignal,
} from './process.js';

describe('machine process', () => {
  const config = { entrypoint: ['/entry', '-x'], cmd: ['serve', '--port=1'], env: [] };

  it('takes Entrypoint + Cmd, `command` in place of Cmd, `start` in place of both', () => {
    expect(machineArgv({}, config)).toEqual(['/entry', '-x', 'serve', '--port=1']);
    expect(machineArgv({ command: ['migrate'] }, config)).toEqual(['/entry', '-x', 'migrate']);
    expect(machineArgv({ start: 'npm start', command: ['x'] }, config)).toEqual([
      '/bin/sh',
      '-c',
      'npm start',
    ]);
    expect(machineArgv({}, { env: [] })).toEqual([]);
    expect(machineArgv({ command: ['ls'] }, { env: [], cmd: ['a'] })).toEqual(['ls']);
  });

  it('lays the spec env over the image env, with PATH, HOME and HOSTNAME defaults', () => {
    const env = machineEnv(
      ['A=image', 'B=image=with=equals', 'EMPTY', 'bad name=x'],
      { A: 'spec', C: '' },
      {
        hostname: 'h',
      },
    );
    expect(env).toEqual({
      A: 'spec',
      B: 'image=with=equals',
      EMPTY: '',
      C: '',
      PATH: DEFAULT_PATH,
      HOME: '/',
      HOSTNAME: 'h',
    });
    const kept = machineEnv(
      ['PATH=/bin', 'HOME=/srv'],
      { HOSTNAME: 'mine' },
      { hostname: 'h', home: '/root' },
    );
    expect(kept).toMatchObject({ PATH: '/bin', HOME: '/srv', HOSTNAME: 'mine' });
    expect(machineEnv([], {}, { hostname: 'h', home: '/home/app' }).HOME).toBe('/home/app');
  });

  it('defaults the working directory to /', () => {
    expect(machineCwd({ env: [] })).toBe('/');
    expect(machineCwd({ env: [], workingDir: '/app' })).toBe('/app');
    expect(machineCwd({ env: [], workingDir: 'app' })).toBe('/app');
  });

  it('reads signals as STOPSIGNAL writes them, spec first, then image, then SIGTERM', () => {
    expect(normalizeSignal('SIGQUIT')).toBe('SIGQUIT');
    expect(normalizeSignal('quit')).toBe('SIGQUIT');
    expect(normalizeSignal('9')).toBe('SIGKILL');
    expect(normalizeSignal('SIGNOPE')).toBeUndefined();
    expect(normalizeSignal('99')).toBeUndefined();
    expect(stopSignal({ killSignal: 'SIGINT' }, { env: [], stopSignal: 'SIGQUIT' })).toBe('SIGINT');
    expect(stopSignal({}, { env: [], stopSignal: '3' })).toBe('SIGQUIT');
    expect(stopSignal({}, { env: [] })).toBe('SIGTERM');
  });
});
