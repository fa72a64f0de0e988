import { describe, expect, it } from 'vitest';
import { encodeCommand, parseReply } from './resp.js';

const parse = (text: string) => parseReply(Buffer.from(text), 0);

describe('RESP', () => {
  it('encodes a command as an array of bulk strings', () => {
    expect(encodeCommand(['AUTH', 'pier', 'pässword']).toString()).toBe(
      '*3\r\n$4\r\nAUTH\r\n$4\r\npier\r\n$9\r\npässword\r\n',
    );
  });

  it('parses the reply types the control connection meets', () => {
    expect(parse('+PONG\r\n')).toEqual({ value: 'PONG', next: 7 });
    expect(parse(':42\r\n')?.value).toBe(42);
    expect(parse('$-1\r\n')?.value).toBeNull();
    expect(parse('$5\r\nhello\r\n')?.value).toBe('hello');
    expect(parse('*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n')?.value).toEqual(['appendonly', 'yes']);
    expect(parse('-LOADING Redis is loading\r\n')?.value).toMatchObject({
      message: 'LOADING Redis is loading',
    });
  });

  it('waits for a reply that has not fully arrived', () => {
    expect(parse('$5\r\nhel')).toBeUndefined();
    expect(parse('*2\r\n$1\r\na\r\n')).toBeUndefined();
    expect(parse('+PON')).toBeUndefined();
  });
});
