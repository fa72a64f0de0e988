/**
 * `machine_exec`: a command run in a real machine through the shell-session route, with
 * that route's agent rules; refusals come back as the route's code.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { busyboxLayer } from '../../src/runtime/images/build.test-helper.js';
import { canRunMachines, startMachineBed, type MachineBed } from '../machines/bed.js';
import { modernRequest, post } from './helpers.js';

let bed: MachineBed;
let machineId: string;

async function exec(token: string, args: Record<string, unknown>) {
  const res = await post(
    bed.tp.url,
    ...modernRequest(token, 'tools/call', { name: 'machine_exec', arguments: args }),
  );
  expect(res.status).toBe(200);
  const result = res.json.result as { isError?: boolean; content: { text: string }[] };
  return { isError: result.isError === true, answer: JSON.parse(result.content[0]!.text) };
}

beforeAll(async () => {
  if (!canRunMachines) return;
  bed = await startMachineBed('mx', 240);
  const image = await bed.image('mcp-box:1', {
    layers: [busyboxLayer()],
    config: { Cmd: ['/bin/sh', '-c', 'exec httpd -f -p 3000 -h /'] },
  });
  expect((await bed.req('POST', '/v1/apps', { name: 'mcp-box' })).status).toBe(201);
  const made = await bed.req('POST', '/v1/apps/mcp-box/machines', { image });
  expect(made.status).toBe(201);
  machineId = made.body.id;
}, 180_000);
afterAll(async () => bed?.close());

describe.skipIf(!canRunMachines)('machine_exec', () => {
  it('runs a command and answers its exit code and output', async () => {
    const res = await exec(bed.org.token, {
      id: machineId,
      command: ['/bin/sh', '-c', 'echo out; echo err >&2; exit 3'],
    });
    expect(res.answer).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'err\n' });
    expect(res.isError).toBe(false);
  });

  it('answers the route’s refusals: a production agent, a missing machine', async () => {
    const prod = await bed.req('POST', '/v1/tokens', {
      name: 'prod agent',
      agent: { class: 'production' },
    });
    const refused = await exec(prod.body.token, { id: machineId, command: ['true'] });
    expect(refused).toMatchObject({
      isError: true,
      answer: { status: 403, code: 'agent-token-production-readonly' },
    });
    const missing = await exec(bed.org.token, { id: 'm-nope', command: ['true'] });
    expect(missing).toMatchObject({
      isError: true,
      answer: { status: 404, code: 'machine-not-found' },
    });
    const audit = await bed.req('GET', `/v1/agent-actions?token=${prod.body.id}`);
    expect(audit.body[0]).toMatchObject({
      route: '/v1/machines/:id/exec',
      verdict: 'refused',
    });
  });
});
