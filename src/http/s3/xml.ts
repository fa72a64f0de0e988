/**
 * S3's XML: the answers the gateway writes, and the two request bodies it reads
 * (CompleteMultipartUpload and Delete). Written by hand, element by element, in S3's
 * own element order, because clients parse some of them strictly.
 */
import { XMLParser } from 'fast-xml-parser';
import { ObjectError } from '../../services/buckets/object-error.js';

const NS = 'http://s3.amazonaws.com/doc/2006-03-01/';

export function esc(value: string | number | boolean): string {
  return (
    String(value)
      .replace(/&/g, '&amp;')
      .replace(/</g, '&lt;')
      .replace(/>/g, '&gt;')
      .replace(/"/g, '&quot;')
      .replace(/'/g, '&apos;')
      // XML 1.0 cannot carry most control characters, even escaped as text.
      .replace(
        // eslint-disable-next-line no-control-regex
        /[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g,
        (c) => `&#x${c.charCodeAt(0).toString(16)};`,
      )
  );
}

export type XmlValue = string | number | boolean | undefined | XmlNode | XmlNode[];
export interface XmlNode {
  [element: string]: XmlValue | XmlValue[];
}

/** Serializes elements in insertion order; arrays repeat the element; undefined is skipped. */
function render(node: XmlNode): string {
  let out = '';
  for (const [name, value] of Object.entries(node)) {
    const values = Array.isArray(value) ? value : [value];
    for (const v of values) {
      if (v === undefined) continue;
      if (typeof v === 'object') out += `<${name}>${render(v as XmlNode)}</${name}>`;
      else out += `<${name}>${esc(v)}</${name}>`;
    }
  }
  return out;
}

/** A whole document with the S3 namespace on its root element. */
export function xmlDocument(root: string, body: XmlNode, withNamespace = true): string {
  const ns = withNamespace ? ` xmlns="${NS}"` : '';
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${root}${ns}>${render(body)}</${root}>`;
}

export function httpDate(d: Date): string {
  return d.toUTCString();
}

export function isoDate(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, '.000Z');
}

const parser = new XMLParser({
  ignoreAttributes: true,
  parseTagValue: false,
  trimValues: false,
  isArray: (name) => name === 'Part' || name === 'Object',
  processEntities: true,
});

function parse(text: string): Record<string, unknown> {
  try {
    return parser.parse(text) as Record<string, unknown>;
  } catch {
    throw new ObjectError(
      'MalformedXML',
      'The XML you provided was not well-formed or did not validate against our published schema.',
    );
  }
}

/** The parts of a CompleteMultipartUpload body. */
export function parseCompleteMultipart(text: string): { partNumber: number; etag: string }[] {
  const doc = parse(text).CompleteMultipartUpload as
    { Part?: { PartNumber?: string; ETag?: string }[] } | undefined;
  if (!doc || !Array.isArray(doc.Part)) {
    throw new ObjectError('MalformedXML', 'The XML you provided did not list any part.');
  }
  return doc.Part.map((p) => {
    const n = Number(p.PartNumber);
    if (!Number.isInteger(n) || typeof p.ETag !== 'string') {
      throw new ObjectError('MalformedXML', 'Every Part needs a PartNumber and an ETag.');
    }
    return { partNumber: n, etag: p.ETag.trim() };
  });
}

/** The keys (and quiet flag) of a DeleteObjects body. */
export function parseDelete(text: string): { keys: string[]; quiet: boolean } {
  const doc = parse(text).Delete as { Object?: { Key?: string }[]; Quiet?: string } | undefined;
  if (!doc || !Array.isArray(doc.Object) || doc.Object.length === 0) {
    throw new ObjectError('MalformedXML', 'The Delete body lists no Object.');
  }
  if (doc.Object.length > 1000)
    throw new ObjectError('MalformedXML', 'At most 1000 objects can be deleted at once.');
  const keys = doc.Object.map((o) => {
    if (typeof o.Key !== 'string' || o.Key.length === 0)
      throw new ObjectError('MalformedXML', 'Every Object needs a Key.');
    return o.Key;
  });
  return { keys, quiet: String(doc.Quiet ?? '').trim() === 'true' };
}
