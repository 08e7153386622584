-- Create the next month off-line, then attach it: the CHECK lets ATTACH skip its scan.
CREATE TABLE measurements_2024_03
    (LIKE measurements INCLUDING DEFAULTS INCLUDING CONSTRAINTS);

ALTER TABLE measurements_2024_03 ADD CONSTRAINT measurements_2024_03_range
    CHECK (recorded_at >= '2024-03-01 00:00:00+00' AND recorded_at < '2024-04-01 00:00:00+00');

ALTER TABLE measurements ATTACH PARTITION measurements_2024_03
    FOR VALUES FROM ('2024-03-01 00:00:00+00') TO ('2024-04-01 00:00:00+00');

ALTER TABLE measurements_2024_03 DROP CONSTRAINT measurements_2024_03_range;

ALTER TABLE measurements DETACH PARTITION measurements_2024_01;
