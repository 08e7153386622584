CREATE TABLE sessions (
    id BIGSERIAL PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    expires_at TIMESTAMPTZ NOT NULL
);
-- A slow step, so that instances started together really overlap.
SELECT pg_sleep(0.5);
