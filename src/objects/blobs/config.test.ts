import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { blobStoreFromConfig, parseObjectStoreUrl } from './config.js';
import { FsBlobStore } from './fs-blob-store.js';
import { S3BlobStore } from './s3-blob-store.js';

describe('parseObjectStoreUrl', () => {
  it('reads bucket, prefix and parameters', () => {
    expect(
      parseObjectStoreUrl(
        's3://pier-blobs/prod/eu?endpoint=http://127.0.0.1:9000&region=eu-1&forcePathStyle=0',
      ),
    ).toEqual({
      bucket: 'pier-blobs',
      prefix: 'prod/eu/',
      endpoint: 'http://127.0.0.1:9000',
      region: 'eu-1',
      forcePathStyle: false,
    });
  });

  it('defaults: no prefix, us-east-1 (or the configured region), path style with an endpoint', () => {
    expect(parseObjectStoreUrl('s3://pier-blobs')).toEqual({
      bucket: 'pier-blobs',
      prefix: '',
      endpoint: undefined,
      region: 'us-east-1',
      forcePathStyle: false,
    });
    expect(parseObjectStoreUrl('s3://pier-blobs/', 'eu-west-3').region).toBe('eu-west-3');
    expect(parseObjectStoreUrl('s3://b-1/x?region=a', 'b').region).toBe('a');
    expect(parseObjectStoreUrl('s3://b-1/?endpoint=https://s3.example.net').forcePathStyle).toBe(
      true,
    );
    expect(parseObjectStoreUrl('s3://b-1/a%20b//').prefix).toBe('a b/');
  });

  it('refuses what it cannot use', () => {
    expect(() => parseObjectStoreUrl('http://bucket/x')).toThrow('s3://');
    expect(() => parseObjectStoreUrl('not a url')).toThrow('not a URL');
    expect(() => parseObjectStoreUrl('s3://key:secret@bucket')).toThrow('credentials');
    expect(() => parseObjectStoreUrl('s3://Bad_Bucket')).toThrow('bucket name');
    expect(() => parseObjectStoreUrl('s3://bucket?endpont=http://x')).toThrow('unknown parameter');
    expect(() => parseObjectStoreUrl('s3://bucket?endpoint=ftp://x')).toThrow('http(s)');
    expect(() => parseObjectStoreUrl('s3://bucket?forcePathStyle=maybe')).toThrow('1 or 0');
  });
});

describe('blobStoreFromConfig', () => {
  it('opens a filesystem store under <dataDir>/objects by default', async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'pier-blobcfg-'));
    const store = await blobStoreFromConfig({ dataDir });
    expect(store).toBeInstanceOf(FsBlobStore);
    expect(store.kind).toBe('fs');
    expect((await stat(path.join(dataDir, 'objects'))).mode & 0o777).toBe(0o700);
    await rm(dataDir, { recursive: true, force: true });
  });

  it('builds an S3 store from a URL and credentials, and needs both credentials', async () => {
    const store = await blobStoreFromConfig({
      dataDir: '/nonexistent',
      objectStoreUrl: 's3://pier-blobs/pier?endpoint=http://127.0.0.1:9',
      accessKeyId: 'id',
      secretAccessKey: 'secret',
    });
    expect(store).toBeInstanceOf(S3BlobStore);
    expect(store.kind).toBe('s3');
    expect((store as S3BlobStore).keyOf('bkt-one', 'blob-one')).toBe('pier/bkt-one/blob-one');
    await expect(
      blobStoreFromConfig({ dataDir: '/x', objectStoreUrl: 's3://pier-blobs', accessKeyId: 'id' }),
    ).rejects.toThrow('secret access key');
  });
});
