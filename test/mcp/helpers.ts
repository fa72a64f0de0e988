/** MCP clients nobody here wrote, and raw JSON-RPC posts, against a test platform. */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const MODERN = '2026-07-28';

/** A 2026-07-28 client (`@modelcontextprotocol/client` 2.x, pinned), connected. */
export async function modernClient(url: string, token: string): Promise<Client> {
  const client = new Client(
    { name: 'pier-test', version: '1' },
    { versionNegotiation: { mode: { pin: MODERN } } },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/v1/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** A 2025-11-25 client (`@modelcontextprotocol/sdk` 1.x), connected with `initialize`. */
export async function legacyClient(url: string, token: string): Promise<LegacyClient> {
  const client = new LegacyClient({ name: 'pier-test', version: '1' });
  await client.connect(
    new LegacyTransport(new URL(`${url}/v1/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** The `_meta` envelope a 2026-07-28 request carries. */
export const envelope = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

export interface RawAnswer {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

/** One raw POST to /v1/mcp. */
export async function post(
  url: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<RawAnswer> {
  const res = await fetch(`${url}/v1/mcp`, {
    method: 'POST',
    body,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** A 2026-07-28 request with its envelope and its standard headers. */
export function modernRequest(
  token: string,
  method: string,
  params: Record<string, unknown> = {},
  id: number = 1,
): [string, Record<string, string>] {
  const headers: Record<string, string> = {
    authorization: `Bearer ${token}`,
    'mcp-protocol-version': MODERN,
    'mcp-method': method,
  };
  if (typeof params.name === 'string') headers['mcp-name'] = params.name;
  return [
    JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: envelope } }),
    headers,
  ];
}
