import { createHash } from 'node:crypto';
import { afterAll, beforeAll, it, expect } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { createBucket, credentialsFor, s3ErrorOf, signedFetch } from './helpers.js';
let tp: TestPlatform;
beforeAll(async () => { tp = await startTestPlatform(); });
afterAll(async () => tp?.close());
it('scratch', async () => {
  const org = await tp.createOrg();
  await createBucket(tp, org, 'scr');
  const cred = await credentialsFor(tp, org, 'scr');
  const body = Buffer.alloc(8 * 1024 * 1024, 'z');
  const res = await signedFetch(cred, { method: 'PUT', path: '/scr/big', body, payloadHash: createHash('sha256').update('x').digest('hex') });
  console.log(await s3ErrorOf(res));
  const res2 = await signedFetch(cred, { method: 'PUT', path: '/scr/big', body, headers: { 'content-md5': createHash('md5').update('x').digest('base64') } });
  console.log(await s3ErrorOf(res2));
});
