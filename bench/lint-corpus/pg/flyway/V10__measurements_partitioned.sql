CREATE TABLE measurements (
    sensor_id   integer          NOT NULL,
    recorded_at timestamptz      NOT NULL,
    value       double precision NOT NULL,
    PRIMARY KEY (sensor_id, recorded_at)
) PARTITION BY RANGE (recorded_at);

CREATE TABLE measurements_2024_01 PARTITION OF measurements
    FOR VALUES FROM ('2024-01-01 00:00:00+00') TO ('2024-02-01 00:00:00+00');
CREATE TABLE measurements_2024_02 PARTITION OF measurements
    FOR VALUES FROM ('2024-02-01 00:00:00+00') TO ('2024-03-01 00:00:00+00');
CREATE TABLE measurements_default PARTITION OF measurements DEFAULT;

CREATE TABLE shipments (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    region      text   NOT NULL,
    order_id    bigint NOT NULL
) PARTITION BY LIST (region);
CREATE TABLE shipments_eu PARTITION OF shipments FOR VALUES IN ('eu-west-1', 'eu-central-1');
CREATE TABLE shipments_us PARTITION OF shipments FOR VALUES IN ('us-east-1');

CREATE TABLE carts (
    account_id uuid  NOT NULL,
    items      jsonb NOT NULL DEFAULT '[]'
) PARTITION BY HASH (account_id);
CREATE TABLE carts_p0 PARTITION OF carts FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE carts_p1 PARTITION OF carts FOR VALUES WITH (MODULUS 2, REMAINDER 1);
