-- Unproven claims block nobody (issue 24): several organizations may claim one name (or
-- overlapping zones) until one of them proves it by DNS. A name is unique per
-- organization, and among proven claims (verified_at is set by the first proof and kept).
-- A claim that lost to another organization's proof, or stayed unproven too long, ends:
-- status `error`, the reason in `error`, `ended_at` set, never checked again.
ALTER TABLE edge_domains DROP CONSTRAINT edge_domains_domain_key;
CREATE UNIQUE INDEX edge_domains_org_domain ON edge_domains (org_id, domain);
CREATE UNIQUE INDEX edge_domains_proven ON edge_domains (domain) WHERE verified_at IS NOT NULL;
ALTER TABLE edge_domains ADD COLUMN ended_at timestamptz;

ALTER TABLE edge_zones DROP CONSTRAINT edge_zones_zone_key;
CREATE UNIQUE INDEX edge_zones_org_zone ON edge_zones (org_id, zone);
CREATE UNIQUE INDEX edge_zones_proven ON edge_zones (zone) WHERE verified_at IS NOT NULL;
ALTER TABLE edge_zones ADD COLUMN ended_at timestamptz;
