ALTER TABLE customers ALTER COLUMN name TYPE text;
ALTER TABLE events ALTER COLUMN payload TYPE json USING payload::json, ALTER COLUMN kind TYPE varchar(64);
ALTER SEQUENCE events_id_seq AS integer;
ALTER TABLE events ALTER COLUMN id TYPE integer;
