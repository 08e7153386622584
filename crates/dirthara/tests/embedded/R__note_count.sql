DROP VIEW IF EXISTS note_count;
CREATE VIEW note_count AS SELECT count(*) AS n FROM notes;
