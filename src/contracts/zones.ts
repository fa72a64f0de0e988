/** Whole-zone claims (spec 2.10, 4.8; the inner fields of `dns` are pier's, docs/api.md). */
import { z } from 'zod';
import { dnsRecordSchema, edgeProgressShape } from './domains.js';

export const zoneSchema = z.object({
  zone: z.string(),
  orgId: z.string(),
  ...edgeProgressShape,
  acmeLabel: z.string(),
  /**
   * `acme`: the CNAME `_acme-challenge.<zone>` → `<acmeLabel>.acme.<edge host>` that
   * delegates DNS-01 to pier; `point`: the wildcard `*.<zone>` at the edge address.
   */
  dns: z.object({ acme: dnsRecordSchema, point: dnsRecordSchema }),
});
export type Zone = z.infer<typeof zoneSchema>;
export const zoneListSchema = z.array(zoneSchema);

export const claimZoneBody = z.strictObject({ zone: z.string().min(1).max(253) });
export const zoneParams = z.object({ zone: z.string().max(253) });

export const zoneCheckAnswerSchema = z.object({
  status: z.literal('queued'),
  zone: z.string(),
  record: zoneSchema,
});
