import { describe, expect, it } from 'vitest';
import { MACHINE_STATES } from '../../contracts/machines.js';
import { judge } from './states.js';

describe('judge', () => {
  it('treats an action that is already done as a no-op', () => {
    expect(judge('start', 'running').kind).toBe('noop');
    expect(judge('stop', 'stopped').kind).toBe('noop');
    expect(judge('suspend', 'suspended').kind).toBe('noop');
  });

  it('answers busy while another operation is under way', () => {
    for (const s of ['requested', 'scheduled', 'starting', 'stopping', 'suspending'] as const) {
      expect(judge('start', s).kind).toBe('busy');
      expect(judge('stop', s).kind).toBe('busy');
    }
  });

  it('lets destroy through from every state but deleted', () => {
    for (const s of MACHINE_STATES) {
      expect(judge('destroy', s).kind).toBe(s === 'deleted' ? 'gone' : 'go');
    }
  });

  it('starts stopped, suspended and failed machines, and suspends only running ones', () => {
    expect(judge('start', 'stopped').kind).toBe('go');
    expect(judge('start', 'suspended').kind).toBe('go');
    expect(judge('start', 'failed').kind).toBe('go');
    expect(judge('suspend', 'running').kind).toBe('go');
    expect(judge('suspend', 'stopped')).toMatchObject({ kind: 'conflict' });
  });
});
