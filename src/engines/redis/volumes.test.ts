import { describe, expect, it } from 'vitest';
import { PoolError } from '../../storage/pool/pool.js';
import { EngineError } from '../engine.js';
import { engineErrorOf, quotaOf } from './volumes.js';

describe('volume errors and quotas', () => {
  it('turns a full pool or filesystem into EngineError no-space, and nothing else', () => {
    const full = engineErrorOf(new PoolError('no-space', 'quota exceeded'), 'redis-dbi-1');
    expect(full).toBeInstanceOf(EngineError);
    expect((full as EngineError).code).toBe('no-space');
    const enospc = Object.assign(new Error('write failed'), { code: 'ENOSPC' });
    expect((engineErrorOf(enospc, 'v') as EngineError).code).toBe('no-space');
    const edquot = Object.assign(new Error('Unknown system error -122'), { errno: -122 });
    expect((engineErrorOf(edquot, 'v') as EngineError).code).toBe('no-space');
    const other = new PoolError('backend', 'boom');
    expect(engineErrorOf(other, 'v')).toBe(other);
  });

  it('sizes the volume in GiB', () => {
    expect(quotaOf({ sizeGb: 2 } as never)).toBe(2 * 1024 ** 3);
  });
});
