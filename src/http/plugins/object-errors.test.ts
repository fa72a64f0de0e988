/** The JSON routes' answer to the bucket services' S3-named errors: catalogue codes. */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ObjectError, type S3ErrorCode } from '../../services/buckets/object-error.js';
import { installErrors } from './errors.js';

let app: FastifyInstance;
beforeAll(async () => {
  app = Fastify() as unknown as FastifyInstance;
  installErrors(app);
  app.get<{ Params: { code: S3ErrorCode } }>('/fail/:code', async (req) => {
    throw new ObjectError(req.params.code, `it failed with ${req.params.code}`, { Key: 'a/b' });
  });
  await app.ready();
});
afterAll(() => app.close());

describe('ObjectError on a JSON route', () => {
  it.each([
    ['NoSuchKey', 404, 'not-found'],
    ['NoSuchBucket', 404, 'not-found'],
    ['AccessDenied', 403, 'forbidden'],
    ['EntityTooLarge', 413, 'too-large'],
    ['PreconditionFailed', 409, 'conflict'],
    ['NotImplemented', 501, 'not-implemented'],
  ] as const)('%s answers %i %s in JSON with the service sentence', async (s3, status, code) => {
    const res = await app.inject({ method: 'GET', url: `/fail/${s3}` });
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    expect(res.json()).toEqual({ error: `it failed with ${s3}`, code });
  });

  it('a malformed request answers 400 bad-request with its issue', async () => {
    const res = await app.inject({ method: 'GET', url: '/fail/InvalidArgument' });
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.code).toBe('bad-request');
    expect(body.error).toContain('it failed with InvalidArgument');
    expect(body.issues).toEqual([{ path: '', message: 'it failed with InvalidArgument' }]);
  });
});
