-- The edge, second step (issue 17): TLS-ALPN-01 answers (by the name being proven) join
-- the HTTP-01 and DNS-01 ones, and each certificate carries the fingerprint of its chain,
-- so a replica rebuilds the TLS context of a name only when its certificate changed.

ALTER TABLE edge_challenges DROP CONSTRAINT edge_challenges_kind_check;
ALTER TABLE edge_challenges ADD CONSTRAINT edge_challenges_kind_check
  CHECK (kind IN ('http-01', 'dns-01', 'tls-alpn-01'));

ALTER TABLE edge_certificates ADD COLUMN fingerprint text;
UPDATE edge_certificates SET fingerprint = encode(sha256(convert_to(chain_pem, 'UTF8')), 'hex');
ALTER TABLE edge_certificates ALTER COLUMN fingerprint SET NOT NULL;
