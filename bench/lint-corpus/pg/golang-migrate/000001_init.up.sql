DO $$
BEGIN
    CREATE TYPE payment_method AS ENUM ('card', 'sepa_debit', 'invoice');
EXCEPTION
    WHEN duplicate_object THEN NULL;
END $$;

CREATE TABLE IF NOT EXISTS customers (
    id            serial PRIMARY KEY,
    external_ref  text UNIQUE,
    name          text NOT NULL,
    preferred_payment payment_method,
    created_at    timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE IF NOT EXISTS events (
    id          serial PRIMARY KEY,
    customer_id integer REFERENCES customers (id),
    kind        varchar(64) NOT NULL,
    payload     json,
    occurred_at timestamp without time zone NOT NULL DEFAULT (now() AT TIME ZONE 'utc')
);

CREATE TABLE IF NOT EXISTS sessions_old (
    token      text PRIMARY KEY,
    customer_id integer NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE INDEX IF NOT EXISTS events_kind_occurred_at_idx ON events (kind, occurred_at);
CREATE INDEX IF NOT EXISTS events_payload_type_idx ON events ((payload ->> 'type'));
CREATE INDEX IF NOT EXISTS customers_name_trgm_idx ON customers USING btree (lower(name) text_pattern_ops) INCLUDE (external_ref);
