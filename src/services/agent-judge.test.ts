import { describe, expect, it } from 'vitest';
import { judgeAgent } from './agent-judge.js';

describe('judgeAgent', () => {
  const base = { app: 'web', usesOrgHeader: false };

  it('applies the class rules of each agent row', () => {
    expect(judgeAgent({ class: 'sandbox' }, { ...base, rule: 'AW' })).toBeUndefined();
    expect(judgeAgent({ class: 'twin' }, { ...base, rule: 'AD' })).toBeUndefined();
    expect(judgeAgent({ class: 'production' }, { ...base, rule: 'AA' })).toBeUndefined();
    expect(judgeAgent({ class: 'production' }, { ...base, rule: 'AW' })).toBe(
      'agent-token-production-readonly',
    );
    expect(judgeAgent({ class: 'production' }, { ...base, rule: 'AD' })).toBe(
      'agent-token-production-data',
    );
    expect(
      judgeAgent({ class: 'production', prodDataRead: true }, { ...base, rule: 'AD' }),
    ).toBeUndefined();
    expect(judgeAgent({ class: 'sandbox' }, { ...base, rule: 'A0' })).toBe(
      'agent-token-credential',
    );
    expect(judgeAgent({ class: 'sandbox' }, { ...base, rule: undefined })).toBe(
      'agent-token-route-unknown',
    );
  });

  it('keeps app-scoped agents to their apps', () => {
    const agent = { class: 'sandbox' as const, apps: ['web'] };
    expect(judgeAgent(agent, { ...base, rule: 'AW' })).toBeUndefined();
    expect(judgeAgent(agent, { ...base, app: 'api', rule: 'AW' })).toBe('agent-token-app-scope');
    expect(judgeAgent(agent, { ...base, app: undefined, rule: 'AA' })).toBe(
      'agent-token-app-scope',
    );
    expect(
      judgeAgent({ class: 'sandbox' }, { ...base, app: undefined, rule: 'AA' }),
    ).toBeUndefined();
  });

  it('keeps app-scoped agents from widening their apps by attaching', () => {
    const widens = "attach the bucket 'b'";
    expect(judgeAgent({ class: 'sandbox', apps: ['web'] }, { ...base, rule: 'AW', widens })).toBe(
      'agent-token-app-scope',
    );
    expect(judgeAgent({ class: 'sandbox' }, { ...base, rule: 'AW', widens })).toBeUndefined();
  });

  it('refuses delegation before anything else', () => {
    expect(judgeAgent({ class: 'sandbox' }, { ...base, usesOrgHeader: true, rule: 'AA' })).toBe(
      'agent-token-delegation',
    );
  });
});
