/**
 * pier's own DNS for DNS-01 (zones' wildcard certificates), so customers never hand over
 * DNS credentials: they delegate `_acme-challenge.<zone>` once, by CNAME, to
 * `<acmeLabel>.acme.<edge host>`, and pier answers the TXT there itself.
 *
 * Authoritative for `acme.<edge host>` (delegate it with an NS record in production).
 * Any other question is forwarded to the upstream resolver (`PIER_DNS_RESOLVER`), and a
 * TXT question whose name is a CNAME into `acme.<edge host>` is answered with the CNAME
 * and pier's TXT values, as a recursive resolver would after chasing it: so an ACME CA
 * may use this server as its resolver (tests point pebble's `-dnsserver` here).
 */
import dgram from 'node:dgram';
import { DnsLookup, normalize } from './dns-lookup.js';

const TYPE = { CNAME: 5, TXT: 16 } as const;
const HEADER = 12;

export interface AcmeDnsOptions {
  host: string;
  port: number;
  /** The edge host: names under `acme.<edgeHost>` are this server's. */
  edgeHost: string;
  upstream?: string;
  /** The TXT values for the first label of `<label>.acme.<edge host>`. */
  txtFor(label: string): Promise<string[]>;
}

export interface AcmeDns {
  port: number;
  close(): Promise<void>;
}

interface Question {
  id: number;
  flags: number;
  name: string;
  type: number;
  end: number;
}

function parseQuestion(msg: Buffer): Question | undefined {
  if (msg.length < HEADER + 5 || (msg.readUInt16BE(2) & 0x8000) !== 0) return undefined;
  if (msg.readUInt16BE(4) !== 1) return undefined;
  const labels: string[] = [];
  let at = HEADER;
  for (;;) {
    const len = msg[at];
    if (len === undefined || len > 63) return undefined;
    if (len === 0) break;
    labels.push(msg.subarray(at + 1, at + 1 + len).toString('latin1'));
    at += 1 + len;
  }
  if (at + 5 > msg.length) return undefined;
  return {
    id: msg.readUInt16BE(0),
    flags: msg.readUInt16BE(2),
    name: labels.join('.').toLowerCase(),
    type: msg.readUInt16BE(at + 1),
    end: at + 5,
  };
}

function encodeName(name: string): Buffer {
  const parts = name.split('.').filter(Boolean);
  return Buffer.concat([
    ...parts.map((p) => Buffer.concat([Buffer.from([p.length]), Buffer.from(p, 'latin1')])),
    Buffer.from([0]),
  ]);
}

function record(name: string, type: number, data: Buffer): Buffer {
  const head = Buffer.alloc(10);
  head.writeUInt16BE(type, 0);
  head.writeUInt16BE(1, 2); // IN
  head.writeUInt32BE(0, 4); // TTL 0: challenge answers change
  head.writeUInt16BE(data.length, 8);
  return Buffer.concat([encodeName(name), head, data]);
}

function txtData(value: string): Buffer {
  const bytes = Buffer.from(value, 'utf8');
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length || i === 0; i += 255) {
    const part = bytes.subarray(i, i + 255);
    chunks.push(Buffer.from([part.length]), part);
  }
  return Buffer.concat(chunks);
}

function reply(query: Buffer, q: Question, rcode: number, answers: Buffer[]): Buffer {
  const head = Buffer.alloc(HEADER);
  head.writeUInt16BE(q.id, 0);
  // QR | AA | RD as asked | RA | rcode
  head.writeUInt16BE(0x8000 | 0x0400 | (q.flags & 0x0100) | 0x0080 | rcode, 2);
  head.writeUInt16BE(1, 4);
  head.writeUInt16BE(answers.length, 6);
  return Buffer.concat([head, query.subarray(HEADER, q.end), ...answers]);
}

export async function startAcmeDns(opts: AcmeDnsOptions): Promise<AcmeDns> {
  const suffix = `.acme.${normalize(opts.edgeHost)}`;
  const lookup = new DnsLookup(opts.upstream);
  const labelOf = (name: string) =>
    name.endsWith(suffix) && !name.slice(0, -suffix.length).includes('.')
      ? name.slice(0, -suffix.length)
      : undefined;
  const socket = dgram.createSocket(opts.host.includes(':') ? 'udp6' : 'udp4');

  const txtAnswers = async (owner: string, label: string) =>
    (await opts.txtFor(label)).map((v) => record(owner, TYPE.TXT, txtData(v)));

  async function answer(msg: Buffer, q: Question): Promise<Buffer | undefined> {
    const own = labelOf(q.name);
    if (own !== undefined || q.name === suffix.slice(1)) {
      const answers = q.type === TYPE.TXT && own ? await txtAnswers(q.name, own) : [];
      return reply(msg, q, 0, answers);
    }
    if (q.type === TYPE.TXT && q.name.startsWith('_acme-challenge.')) {
      const target = (await lookup.cname(q.name))[0];
      const label = target && labelOf(target);
      if (label)
        return reply(msg, q, 0, [
          record(q.name, TYPE.CNAME, encodeName(target)),
          ...(await txtAnswers(target, label)),
        ]);
    }
    return forward(msg);
  }

  function forward(msg: Buffer): Promise<Buffer | undefined> {
    if (!opts.upstream) return Promise.resolve(undefined);
    const [host, port] = [
      opts.upstream.slice(0, opts.upstream.lastIndexOf(':')),
      Number(opts.upstream.slice(opts.upstream.lastIndexOf(':') + 1)),
    ];
    return new Promise((resolve) => {
      const out = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
      const timer = setTimeout(() => {
        out.close();
        resolve(undefined);
      }, 3000);
      out.once('message', (m) => {
        clearTimeout(timer);
        out.close();
        resolve(m);
      });
      out.send(msg, port, host.replace(/^\[|\]$/g, ''));
    });
  }

  socket.on('message', (msg, rinfo) => {
    const q = parseQuestion(msg);
    if (!q) return;
    answer(msg, q).then(
      (out) => out && socket.send(out, rinfo.port, rinfo.address),
      () => socket.send(reply(msg, q, 2, []), rinfo.port, rinfo.address),
    );
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(opts.port, opts.host, () => resolve());
  });
  return {
    port: socket.address().port,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}
