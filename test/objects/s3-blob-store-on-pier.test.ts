/**
 * The S3 blob store against a real S3 service that runs here: another pier's gateway.
 * The same contract as the filesystem store (src/objects/blobs/s3-blob-store.test.ts),
 * pointed at a bucket of a pier started for this file.
 */
import { afterAll } from 'vitest';
import { startTestPlatform } from '../helpers/platform.js';

const upstream = await startTestPlatform();
afterAll(async () => upstream.close());
const org = await upstream.createOrg();
await upstream.request('POST', '/v1/buckets', {
  token: org.token,
  body: { name: 'blob-upstream' },
});
const cred = (
  await upstream.request('POST', '/v1/buckets/blob-upstream/credentials', { token: org.token })
).body;
process.env.PIER_TEST_S3_URL = `s3://blob-upstream/?endpoint=${encodeURIComponent(cred.endpoint)}&region=${cred.region}&forcePathStyle=1`;
process.env.PIER_TEST_S3_ACCESS_KEY_ID = cred.accessKeyId;
process.env.PIER_TEST_S3_SECRET_ACCESS_KEY = cred.secretAccessKey;

await import('../../src/objects/blobs/s3-blob-store.test.js');
