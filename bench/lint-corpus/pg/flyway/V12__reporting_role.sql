DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'shop_reporting') THEN
        CREATE ROLE shop_reporting NOLOGIN;
    END IF;
END
$$;

GRANT USAGE ON SCHEMA public TO shop_reporting;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO shop_reporting;
GRANT SELECT, INSERT, UPDATE ON TABLE orders, line_items TO shop_reporting;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO shop_reporting;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO shop_reporting;
REVOKE UPDATE ON orders FROM shop_reporting;
REVOKE ALL ON FUNCTION pg_catalog.pg_read_file(text) FROM PUBLIC;
