-- +goose Up
CREATE MATERIALIZED VIEW tenant_document_counts AS
SELECT t.id AS tenant_id, t.slug, count(d.id) AS documents
  FROM tenants t
  LEFT JOIN documents d ON d.tenant_id = t.id
 GROUP BY t.id, t.slug
WITH NO DATA;

CREATE UNIQUE INDEX tenant_document_counts_pk ON tenant_document_counts (tenant_id);
REFRESH MATERIALIZED VIEW tenant_document_counts;

CREATE OR REPLACE VIEW active_users WITH (security_barrier = true) AS
SELECT id, tenant_id, email FROM users WHERE legacy_token IS NULL;

CREATE FUNCTION user_count(p_tenant uuid) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT count(*) FROM users WHERE tenant_id = p_tenant;
END;

-- +goose Down
DROP FUNCTION user_count(uuid);
DROP VIEW active_users;
DROP MATERIALIZED VIEW tenant_document_counts;
