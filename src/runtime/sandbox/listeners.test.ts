import net from 'node:net';
import { endianness } from 'node:os';
import { describe, expect, it } from 'vitest';
import { listensOn, parseListeners } from './listeners.js';

const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1111 00000000:0000 0A 00000000:00000000 00:00000000 00000000   106        0 6193 1 0 100 0 0 10 0
   1: 00000000:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5415 1 0 100 0 0 10 0
   2: 0500D50A:0BB8 0100D50A:9C40 01 00000000:00000000 00:00000000 00000000     0        0 5416 1 0 100 0 0 10 0
`;
const TCP6 = `  sl  local_address                         remote_address                        st
   0: 00000000000000000000000001000000:1111 00000000000000000000000000000000:0000 0A
   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A
   2: 0000000000000000FFFF00000500D50A:1F90 00000000000000000000000000000000:0000 0A
`;

describe.skipIf(endianness() !== 'LE')('listening sockets', () => {
  it('reads LISTEN sockets of /proc/net/tcp and tcp6, skipping other states', () => {
    expect(parseListeners(TCP)).toEqual([
      { address: '127.0.0.1', port: 0x1111 },
      { address: '0.0.0.0', port: 3000 },
    ]);
    expect(parseListeners(TCP6)).toEqual([
      { address: '0:0:0:0:0:0:0:1', port: 0x1111 },
      { address: '::', port: 80 },
      { address: '::ffff:10.213.0.5', port: 8080 },
    ]);
  });

  it("finds this process's own listener, and says why not for other ports", async () => {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    try {
      expect(await listensOn(process.pid, '127.0.0.1', port)).toEqual({ listening: true });
      expect(await listensOn(process.pid, '10.213.0.5', port)).toEqual({
        listening: false,
        reason: `port ${port} listens only on 127.0.0.1, not on the machine's address`,
      });
    } finally {
      server.close();
    }
    expect(await listensOn(process.pid, '127.0.0.1', port)).toEqual({
      listening: false,
      reason: `nothing listens on port ${port}`,
    });
    expect(await listensOn(2 ** 22 + 1, '127.0.0.1', port)).toBeUndefined();
  });
});
