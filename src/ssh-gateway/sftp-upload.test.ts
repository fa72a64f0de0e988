/** An SFTP upload's bytes: taken in order, capped, and dropped whole on any refusal. */
import { describe, expect, it } from 'vitest';
import { absolute, BadPath, canonical } from './sftp-names.js';
import { Upload } from './sftp-upload.js';

async function drain(u: Upload): Promise<string> {
  let out = '';
  for await (const c of u) out += c.toString();
  return out;
}

describe('Upload', () => {
  it('hands the writer its bytes in order and ends when told', async () => {
    const u = new Upload(100);
    const read = drain(u);
    await u.started;
    await u.push(0, Buffer.from('ab'));
    await u.push(2, Buffer.from('cd'));
    u.end();
    expect(await read).toBe('abcd');
  });

  it('refuses a write out of order or past the cap, and the writer then fails', async () => {
    const u = new Upload(4);
    const read = drain(u);
    await u.push(0, Buffer.from('ab'));
    await expect(u.push(5, Buffer.from('x'))).rejects.toMatchObject({ code: 'unprocessable' });
    await expect(read).rejects.toMatchObject({ code: 'unprocessable' });
    const capped = new Upload(4);
    const read2 = drain(capped);
    await expect(capped.push(0, Buffer.from('12345'))).rejects.toMatchObject({ code: 'too-large' });
    await expect(read2).rejects.toMatchObject({ code: 'too-large' });
  });
});

describe('paths', () => {
  it('reads relative paths from the working directory and refuses a way out', () => {
    expect(absolute('/srv', 'a/b')).toBe('/srv/a/b');
    expect(absolute('/srv', '.')).toBe('/srv');
    expect(absolute('/srv', '/etc/x')).toBe('/etc/x');
    expect(canonical('/srv', '../etc/./x//y/..')).toBe('/etc/x');
    expect(canonical('/', '.')).toBe('/');
    expect(() => canonical('/srv', '../../x')).toThrow(BadPath);
    expect(() => absolute('/', 'a\0b')).toThrow(BadPath);
  });
});
