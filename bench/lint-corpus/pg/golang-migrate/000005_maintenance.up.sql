-- Must run outside a transaction: migrate with x-multi-statement=true so each statement runs alone.
REINDEX INDEX CONCURRENTLY events_kind_occurred_at_idx;
VACUUM (ANALYZE, VERBOSE) events;
ALTER TABLE events SET (autovacuum_vacuum_scale_factor = 0.02, fillfactor = 90);
ALTER TABLE events ALTER COLUMN kind SET STATISTICS 500;
ALTER TABLE clients SET TABLESPACE pg_default;
CLUSTER events USING events_pkey;
