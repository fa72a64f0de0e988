-- Operator limits per organization beyond apps and computers (services/org-limits.ts):
-- managed databases, machines not destroyed, total memory (MB) of machines and databases,
-- and reserved storage (GB) of volumes and databases. NULL is unlimited.

ALTER TABLE orgs
  ADD COLUMN limit_databases  integer CHECK (limit_databases >= 0),
  ADD COLUMN limit_machines   integer CHECK (limit_machines >= 0),
  ADD COLUMN limit_memory_mb  integer CHECK (limit_memory_mb >= 0),
  ADD COLUMN limit_storage_gb integer CHECK (limit_storage_gb >= 0);
