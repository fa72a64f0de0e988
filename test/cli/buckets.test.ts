/**
 * `pier buckets …` against a real pier: bucket lifecycle, streaming cp both ways (file,
 * stdin, stdout), progress, ls with pagination, rm, presign, CORS and the error paths.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestOrg, type TestPlatform } from '../helpers/platform.js';
import { pierWith, startCliBed, type CliBed } from './run-cli.js';

let tp: TestPlatform;
let org: TestOrg;
let tmp: CliBed['tmp'];
let env: Record<string, string>;
const pier = pierWith(() => env);
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const BUCKET = 'cli-files';

/** Stores `body` under `key` the way a browser would: a presigned PUT with plain fetch. */
async function putObject(key: string, body: string): Promise<void> {
  const pre = await tp.request('POST', `/v1/buckets/${BUCKET}/presign`, {
    token: org.token,
    body: { op: 'put', key },
  });
  expect(pre.status).toBe(200);
  const res = await fetch(pre.body.url, { method: 'PUT', headers: pre.body.requiredHeaders, body });
  expect(res.status).toBe(200);
}

beforeAll(async () => {
  ({ tp, org, tmp, env } = await startCliBed());
  const created = await tp.request('POST', '/v1/buckets', {
    token: org.token,
    body: { name: BUCKET },
  });
  expect(created.status).toBe(201);
});
afterAll(async () => {
  await tp?.close();
  await tmp?.remove();
});

describe('pier buckets create|list|show|delete', () => {
  it('creates, lists, shows and deletes a bucket', async () => {
    // An organization of its own, so the listing holds exactly this bucket.
    const own = await tp.createOrg();
    const as = { env: { PIER_API_KEY: own.token } };
    const created = await pier(['buckets', 'create', 'cli-life'], as);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^Created bucket cli-life \(\S+\)\.\n$/);

    const [json, table, show, showJson] = await Promise.all([
      pier(['buckets', 'list', '--json'], as),
      pier(['buckets', 'list'], as),
      pier(['buckets', 'show', 'cli-life'], as),
      pier(['buckets', 'show', 'cli-life', '--json'], as),
    ]);
    const list = JSON.parse(json.stdout) as { id: string; name: string }[];
    expect(list).toEqual([expect.objectContaining({ name: 'cli-life', orgId: own.id })]);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+ID\s+CREATED$/);
    expect(lines[1]).toMatch(new RegExp(`^cli-life\\s+${list[0]!.id}\\s+\\d{4}-\\d\\d-\\d\\d `));
    expect(show.stdout).toMatch(/^Name: +cli-life$/m);
    expect(show.stdout).toMatch(new RegExp(`^Organization: +${own.id}$`, 'm'));
    expect(show.stdout).toMatch(/^Storage: +\S+$/m);
    expect(JSON.parse(showJson.stdout)).toEqual(list[0]);

    const del = await pier(['buckets', 'delete', 'cli-life'], as);
    expect(del.stderr).toBe('');
    expect(del.stdout).toBe('Deleted bucket cli-life.\n');
    expect((await pier(['buckets', 'list'], as)).stdout).toBe('No buckets.\n');
    const missing = await pier(['buckets', 'show', 'cli-life'], as);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^pier: .+ \(not-found\)\n$/);
  });
});

describe('pier buckets cp', () => {
  it('uploads and downloads a 3 MiB file byte for byte, quietly when stderr is no terminal', async () => {
    const data = randomBytes(3 * 1024 * 1024);
    const src = path.join(tmp.dir, 'big.bin');
    await writeFile(src, data);

    const up = await pier(['buckets', 'cp', src, `${BUCKET}:blobs/big.bin`]);
    expect(up.stderr).toBe('');
    expect(up.code).toBe(0);
    expect(up.stdout).toBe(`Uploaded ${src} to ${BUCKET}:blobs/big.bin (3.1 MB).\n`);

    const dst = path.join(tmp.dir, 'big.copy');
    const down = await pier(['buckets', 'cp', `${BUCKET}:blobs/big.bin`, dst]);
    expect(down.stderr).toBe('');
    expect(down.code).toBe(0);
    expect(down.stdout).toBe(`Downloaded ${BUCKET}:blobs/big.bin to ${dst} (3.1 MB).\n`);
    expect(sha256(await readFile(dst))).toBe(sha256(data));

    // Into a directory: the key's last part names the file; no temporary file is left.
    const dir = path.join(tmp.dir, 'into');
    await mkdir(dir);
    const intoDir = await pier(['buckets', 'cp', `${BUCKET}:blobs/big.bin`, dir]);
    expect(intoDir.code).toBe(0);
    expect(await readdir(dir)).toEqual(['big.bin']);
    expect(sha256(await readFile(path.join(dir, 'big.bin')))).toBe(sha256(data));
  });

  it('shows progress on stderr with --progress', async () => {
    const src = path.join(tmp.dir, 'progress.bin');
    await writeFile(src, randomBytes(3 * 1024 * 1024));
    // The key is left to the file name by ending the target with a slash.
    const up = await pier(['buckets', 'cp', src, `${BUCKET}:blobs/`, '--progress']);
    expect(up.code).toBe(0);
    expect(up.stdout).toBe(`Uploaded ${src} to ${BUCKET}:blobs/progress.bin (3.1 MB).\n`);
    const lines = up.stderr.trimEnd().split('\n');
    expect(lines.at(-1)).toMatch(
      new RegExp(
        `^upload ${BUCKET}:blobs/progress\\.bin {2}3\\.1 MB / 3\\.1 MB {2}100% {2}\\d+\\.\\d MB/s$`,
      ),
    );
    for (const line of lines) expect(line).toMatch(/^upload .+ \d+% {2}\d+\.\d MB\/s$/);

    // To a file: run-cli's stdout buffer (1 MiB) is smaller than the object.
    const down = await pier([
      'buckets',
      'cp',
      `${BUCKET}:blobs/progress.bin`,
      path.join(tmp.dir, 'progress.copy'),
      '--progress',
    ]);
    expect(down.code).toBe(0);
    expect(down.stderr.trimEnd().split('\n').at(-1)).toMatch(
      /^download \S+ {2}3\.1 MB \/ 3\.1 MB {2}100% {2}\d+\.\d MB\/s$/,
    );
  });

  it('uploads from stdin and downloads to stdout', async () => {
    const text = Array.from({ length: 5000 }, (_, i) => `line ${i}: ${'x'.repeat(40)}`).join('\n');
    const up = await pier(['buckets', 'cp', '-', `${BUCKET}:text/lines.txt`], { input: text });
    expect(up.stderr).toBe('');
    expect(up.code).toBe(0);
    expect(up.stdout).toBe(
      `Uploaded stdin to ${BUCKET}:text/lines.txt (${(Buffer.byteLength(text) / 1000).toFixed(1)} kB).\n`,
    );

    const down = await pier(['buckets', 'cp', `${BUCKET}:text/lines.txt`, '-']);
    expect(down.stderr).toBe('');
    expect(down.code).toBe(0);
    expect(down.stdout).toBe(text);
  });

  it('stores --content-type with an upload', async () => {
    const src = path.join(tmp.dir, 'page.html');
    await writeFile(src, '<h1>hi</h1>');
    const up = await pier([
      'buckets',
      'cp',
      src,
      `${BUCKET}:site/index.html`,
      '--content-type',
      'text/html',
    ]);
    expect(up.code).toBe(0);
    const pre = await tp.request('POST', `/v1/buckets/${BUCKET}/presign`, {
      token: org.token,
      body: { key: 'site/index.html' },
    });
    const res = await fetch(pre.body.url);
    expect(res.headers.get('content-type')).toBe('text/html');
    expect(await res.text()).toBe('<h1>hi</h1>');
  });

  it("fails a missing object with the gateway's NoSuchKey and leaves no file behind", async () => {
    const dir = path.join(tmp.dir, 'missing');
    await mkdir(dir);
    const res = await pier(['buckets', 'cp', `${BUCKET}:no/such.bin`, path.join(dir, 'out.bin')]);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toBe('pier: The specified key does not exist. (NoSuchKey)\n');
    expect(await readdir(dir)).toEqual([]);
  });

  it('refuses arguments it cannot make sense of, before any request', async () => {
    const [noRemote, twoRemotes, noFile, stdinNoKey, noBucket] = await Promise.all([
      pier(['buckets', 'cp', 'a.txt', 'b.txt']),
      pier(['buckets', 'cp', `${BUCKET}:a`, `${BUCKET}:b`]),
      pier(['buckets', 'cp', path.join(tmp.dir, 'nope.txt'), `${BUCKET}:x`]),
      pier(['buckets', 'cp', '-', `${BUCKET}:dir/`]),
      pier(['buckets', 'cp', '-', 'no-such-bucket:x'], { input: 'x' }),
    ]);
    expect(noRemote.code).toBe(1);
    expect(noRemote.stderr).toBe("pier: one side must be BUCKET:KEY (got 'a.txt' and 'b.txt')\n");
    expect(twoRemotes.stderr).toBe(
      'pier: copying between buckets is not supported; one side must be local\n',
    );
    expect(noFile.stderr).toBe(`pier: cannot read ${path.join(tmp.dir, 'nope.txt')}: ENOENT\n`);
    expect(stdinNoKey.stderr).toBe(`pier: give the key to store stdin under: ${BUCKET}:KEY\n`);
    expect(noBucket.code).toBe(1);
    expect(noBucket.stderr).toMatch(/^pier: .+ \(not-found\)\n$/);
  });
});

describe('pier buckets ls|rm', () => {
  const keys = Array.from({ length: 150 }, (_, i) => `many/${String(i).padStart(4, '0')}.txt`);

  beforeAll(async () => {
    // Presigned PUTs in parallel: 150 CLI processes would only make the test slow.
    for (let i = 0; i < keys.length; i += 30) {
      await Promise.all(keys.slice(i, i + 30).map((k) => putObject(k, `body of ${k}`)));
    }
  });

  it('lists everything under a prefix across pages', async () => {
    const [paged, table, other, empty] = await Promise.all([
      pier(['buckets', 'ls', BUCKET, '--prefix', 'many/', '--page-size', '40', '--json']),
      pier(['buckets', 'ls', BUCKET, '--prefix', 'many/']),
      pier(['buckets', 'ls', BUCKET, '--json']),
      pier(['buckets', 'ls', BUCKET, '--prefix', 'none/']),
    ]);
    expect(paged.code).toBe(0);
    const page = JSON.parse(paged.stdout) as { bucket: string; objects: { key: string }[] };
    expect(page.bucket).toBe(BUCKET);
    expect(page.objects.map((o) => o.key)).toEqual(keys);
    expect(page.objects[0]).toEqual({
      key: 'many/0000.txt',
      sizeBytes: 'body of many/0000.txt'.length,
      lastModified: expect.stringMatching(/^\d{4}-/),
    });

    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^SIZE\s+MODIFIED\s+KEY$/);
    expect(lines).toHaveLength(151);
    expect(lines[1]).toMatch(/^21 B\s+\d{4}-\d\d-\d\d \d\d:\d\dZ\s+many\/0000\.txt$/);

    // Without a prefix the other tests' objects show up too.
    const all = (JSON.parse(other.stdout) as { objects: { key: string }[] }).objects;
    expect(all.length).toBeGreaterThan(150);
    expect(empty.stdout).toBe(`No objects under 'none/' in ${BUCKET}.\n`);
  });

  it('deletes objects and says which keys were not there', async () => {
    const res = await pier(['buckets', 'rm', BUCKET, 'many/0000.txt', 'many/0001.txt', 'gone']);
    expect(res.code).toBe(0);
    expect(res.stdout).toBe(`Deleted ${BUCKET}:many/0000.txt\nDeleted ${BUCKET}:many/0001.txt\n`);
    expect(res.stderr).toBe(`Note: no object ${BUCKET}:gone\n`);
    const ls = await pier(['buckets', 'ls', BUCKET, '--prefix', 'many/', '--json']);
    expect((JSON.parse(ls.stdout) as { objects: unknown[] }).objects).toHaveLength(148);
  });
});

describe('pier buckets presign', () => {
  it('prints a GET URL that works with fetch', async () => {
    await putObject('presign/hello.txt', 'hello presign');
    const res = await pier(['buckets', 'presign', BUCKET, 'presign/hello.txt', '--expires', '60']);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^http:\/\/\S+X-Amz-Expires=60\S*\n$/);
    expect(await (await fetch(res.stdout.trim())).text()).toBe('hello presign');
  });

  it('prints a PUT URL with the headers to send', async () => {
    const res = await pier([
      'buckets',
      'presign',
      BUCKET,
      'presign/up.txt',
      '--put',
      '--content-type',
      'text/plain',
    ]);
    expect(res.code).toBe(0);
    const [url, ...rest] = res.stdout.trimEnd().split('\n');
    expect(rest).toEqual(['Send these headers exactly:', '  content-type: text/plain']);
    const put = await fetch(url!, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain' },
      body: 'put through the CLI URL',
    });
    expect(put.status).toBe(200);

    const json = await pier(['buckets', 'presign', BUCKET, 'presign/up.txt', '--json']);
    const signed = JSON.parse(json.stdout) as { url: string; method: string };
    expect(signed.method).toBe('GET');
    expect(await (await fetch(signed.url)).text()).toBe('put through the CLI URL');

    const wrong = await pier(['buckets', 'presign', BUCKET, 'k', '--content-type', 'text/plain']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toBe('pier: --content-type goes with --put\n');
  });
});

describe('pier buckets cors', () => {
  it('sets rules from a file, shows them, prints warnings, and removes them from stdin', async () => {
    const file = path.join(tmp.dir, 'cors.json');
    await writeFile(
      file,
      JSON.stringify({
        rules: [
          {
            id: 'web',
            allowedMethods: ['GET', 'PUT'],
            allowedOrigins: ['https://app.example.com'],
            allowedHeaders: ['*'],
            maxAgeSeconds: 600,
          },
          { allowedMethods: ['GET'], allowedOrigins: ['example.com'] },
        ],
      }),
    );
    const set = await pier(['buckets', 'cors', BUCKET, '--set', file]);
    expect(set.code).toBe(0);
    expect(set.stdout).toBe(`Set 2 CORS rules on ${BUCKET}.\n`);
    expect(set.stderr).toBe(
      "Warning: rule 2: the origin 'example.com' has no scheme (like https://), so no browser sends it.\n",
    );

    const [show, json] = await Promise.all([
      pier(['buckets', 'cors', BUCKET]),
      pier(['buckets', 'cors', BUCKET, '--json']),
    ]);
    expect(show.stdout).toMatch(/^Rule 1 \(web\)\n {2}Methods: +GET, PUT\n {2}Origins: +https:/);
    expect(show.stdout).toMatch(/^ {2}Max age: +600s$/m);
    expect(show.stdout).toMatch(/\n\nRule 2\n {2}Methods: +GET\n {2}Origins: +example\.com\n$/);
    expect(show.stderr).toMatch(/^Warning: rule 2: /);
    const cors = JSON.parse(json.stdout) as { rules: unknown[]; warnings: string[] };
    expect(cors.rules).toHaveLength(2);
    expect(cors.warnings).toEqual([expect.stringContaining("'example.com' has no scheme")]);

    const removed = await pier(['buckets', 'cors', BUCKET, '--set', '-'], { input: '[]' });
    expect(removed.stdout).toBe(`Removed the CORS rules of ${BUCKET}.\n`);
    expect((await pier(['buckets', 'cors', BUCKET])).stdout).toBe(`No CORS rules on ${BUCKET}.\n`);
  });

  it('refuses a file that holds no rules, and shows the server refusing a bad rule', async () => {
    const [bad, invalid] = await Promise.all([
      pier(['buckets', 'cors', BUCKET, '--set', '-'], { input: '{"nope":1}' }),
      pier(['buckets', 'cors', BUCKET, '--set', '-'], {
        input: '[{"allowedMethods":["FETCH"],"allowedOrigins":["*"]}]',
      }),
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe(
      'pier: the CORS file must hold {"rules": [...]} or an array of rules\n',
    );
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/\(bad-request\)\n {2}- rules\.0\.allowedMethods\.0: /);
  });
});

describe('pier buckets delete on a non-empty bucket', () => {
  it('refuses without --force (409 bucket-not-empty), then deletes everything with it', async () => {
    const refused = await pier(['buckets', 'delete', BUCKET]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toMatch(/^pier: .+ \(bucket-not-empty\)\n$/);

    const forced = await pier(['buckets', 'delete', BUCKET, '--force']);
    expect(forced.stderr).toBe('');
    expect(forced.code).toBe(0);
    expect(forced.stdout).toMatch(
      new RegExp(`^Deleted bucket ${BUCKET} \\(deleted \\d+ objects\\)\\.\\n$`),
    );
    expect((await pier(['buckets', 'list'])).stdout).toBe('No buckets.\n');
  });
});
