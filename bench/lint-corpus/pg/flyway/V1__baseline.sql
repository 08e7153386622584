-- Baseline schema for the shop service.
CREATE EXTENSION IF NOT EXISTS pgcrypto;
CREATE EXTENSION IF NOT EXISTS citext WITH SCHEMA public;

CREATE TABLE accounts (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    email       citext      NOT NULL,
    display_name text,
    plan        text        NOT NULL DEFAULT 'free',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT accounts_email_key UNIQUE (email),
    CONSTRAINT accounts_plan_check CHECK (plan IN ('free', 'team', 'enterprise'))
);

CREATE TABLE products (
    id            bigserial PRIMARY KEY,
    sku           varchar(32) NOT NULL UNIQUE,
    name          text        NOT NULL,
    description   text,
    price_cents   integer     NOT NULL,
    currency      char(3)     NOT NULL DEFAULT 'EUR',
    attributes    jsonb       NOT NULL DEFAULT '{}'::jsonb,
    archived_at   timestamptz
);
