-- +goose Up
CREATE TABLE documents (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  uuid   NOT NULL REFERENCES tenants (id),
    owner_id   bigint NOT NULL REFERENCES users (id),
    title      text   NOT NULL,
    body       text,
    visibility text   NOT NULL DEFAULT 'private'
);

ALTER TABLE documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE documents FORCE ROW LEVEL SECURITY;

CREATE POLICY documents_tenant_isolation ON documents
    USING (tenant_id = current_setting('app.current_tenant')::uuid)
    WITH CHECK (tenant_id = current_setting('app.current_tenant')::uuid);

CREATE POLICY documents_public_read ON documents AS PERMISSIVE FOR SELECT TO PUBLIC
    USING (visibility = 'public');

COMMENT ON POLICY documents_tenant_isolation ON documents IS 'Rows are visible only inside the tenant set by the app.';

-- +goose Down
DROP POLICY IF EXISTS documents_public_read ON documents;
DROP POLICY IF EXISTS documents_tenant_isolation ON documents;
DROP TABLE documents;
