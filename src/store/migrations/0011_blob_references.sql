-- The orphan sweep (services/buckets/orphan-sweep.ts) asks which of a batch of blob ids
-- rows still name; without these it would scan a whole bucket's objects for each batch.
CREATE INDEX objects_blob ON objects (blob_id);
CREATE INDEX multipart_parts_blob ON multipart_parts (blob_id);
