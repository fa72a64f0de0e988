/**
 * Custom domains of an app (spec 4.8; record fields are pier's, docs/api.md "Custom
 * domains"). The name is checked by the service (hostname rules, wildcards) so that
 * every problem is reported in one answer with the others.
 */
import { z } from 'zod';

/** One DNS record the customer sets. */
export const dnsRecordSchema = z.object({
  type: z.enum(['TXT', 'CNAME', 'A', 'AAAA']),
  name: z.string(),
  value: z.string(),
});
export type DnsRecord = z.infer<typeof dnsRecordSchema>;

export const edgeStatusSchema = z.enum(['pending_dns', 'verified', 'cert_issued', 'error']);

/** The progress fields domains and zones share (spec 2.10). */
export const edgeProgressShape = {
  status: edgeStatusSchema,
  error: z.string().nullable().optional(),
  attempts: z.number().int(),
  lastCheckedAt: z.string().optional(),
  verifiedAt: z.string().optional(),
  certIssuedAt: z.string().optional(),
  certNotAfter: z.string().optional(),
  createdAt: z.string(),
};

export const domainSchema = z.object({
  domain: z.string(),
  app: z.string(),
  ...edgeProgressShape,
  /** Another hostname of the same app this domain answers with a 308 to, or null. */
  redirectTo: z.string().nullable(),
  /** The proven zone of the organization that covers the name, if any. */
  zone: z.string().optional(),
  /**
   * What to set in DNS: `proof` (TXT `_pier-challenge.<domain>`, absent when a zone
   * covers the name) and `point` (CNAME, or A/AAAA, at the edge address).
   */
  dns: z.object({ proof: dnsRecordSchema.optional(), point: dnsRecordSchema }),
});
export type Domain = z.infer<typeof domainSchema>;
export const domainListSchema = z.array(domainSchema);

export const addDomainBody = z.strictObject({ domain: z.string().min(1).max(253) });
export const redirectBody = z.strictObject({ to: z.string().min(1).max(253).nullable() });

export const domainParams = z.object({
  name: z.string().max(63),
  domain: z.string().max(253),
});

/** `POST …/check`: the check is queued; the record as it stands now. */
export const domainCheckAnswerSchema = z.object({
  status: z.literal('queued'),
  domain: z.string(),
  record: domainSchema,
});

/** `GET /.well-known/acme-challenge/:token` (the ACME CA's HTTP-01 fetch). */
export const acmeChallengeParams = z.object({ token: z.string().max(256) });
