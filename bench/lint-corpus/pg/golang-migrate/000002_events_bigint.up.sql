-- The events id is about to overflow int4.
ALTER TABLE events ALTER COLUMN id TYPE bigint;
ALTER SEQUENCE events_id_seq AS bigint;
ALTER TABLE events
    ALTER COLUMN kind SET DATA TYPE text,
    ALTER COLUMN payload TYPE jsonb USING payload::jsonb;
ALTER TABLE customers ALTER COLUMN name TYPE varchar(255) COLLATE "C";
