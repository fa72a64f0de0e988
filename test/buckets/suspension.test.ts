import { PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { createBucket, credentialsFor, s3Client, sdkError } from './helpers.js';

let tp: TestPlatform;
beforeAll(async () => {
  tp = await startTestPlatform();
});
afterAll(async () => tp?.close());

describe('a suspended organization at the gateway', () => {
  it('refuses its S3 keys while suspended, and takes them back after', async () => {
    const org = await tp.createOrg();
    await createBucket(tp, org, 'suspended-bkt');
    const s3 = s3Client(await credentialsFor(tp, org, 'suspended-bkt'));
    const put = () =>
      s3.send(new PutObjectCommand({ Bucket: 'suspended-bkt', Key: 'k', Body: 'x' }));
    await put();
    await tp.admin('POST', `/admin/v1/orgs/${org.id}/suspend`);
    const refused = await sdkError(put());
    expect(refused.status).toBe(403);
    expect(refused.code).toBe('AccessDenied');
    await tp.admin('POST', `/admin/v1/orgs/${org.id}/unsuspend`);
    await put();
  });
});
