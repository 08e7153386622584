-- +goose Up
CREATE EXTENSION IF NOT EXISTS "uuid-ossp";

CREATE TABLE tenants (
    id         uuid PRIMARY KEY DEFAULT uuid_generate_v4(),
    slug       text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id         bigserial PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES tenants (id),
    email      text,
    name       text,
    legacy_token text,
    created_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE tenants IS 'One row per customer organisation.';
COMMENT ON COLUMN users.legacy_token IS 'Deprecated: replaced by the sessions table. Do not read.';

-- +goose Down
DROP TABLE users;
DROP TABLE tenants;
