-- +goose Up
CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    table_name  text        NOT NULL,
    op          char(1)     NOT NULL,
    row_id      bigint,
    old_row     jsonb,
    new_row     jsonb,
    changed_by  text        NOT NULL DEFAULT current_user,
    changed_at  timestamptz NOT NULL DEFAULT statement_timestamp()
);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_row_change() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $body$
DECLARE
    v_id bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN
        v_id := OLD.id;
        INSERT INTO audit_log (table_name, op, row_id, old_row)
        VALUES (TG_TABLE_NAME, 'D', v_id, to_jsonb(OLD));
        RETURN OLD;
    ELSIF TG_OP = 'UPDATE' THEN
        v_id := NEW.id;
        INSERT INTO audit_log (table_name, op, row_id, old_row, new_row)
        VALUES (TG_TABLE_NAME, 'U', v_id, to_jsonb(OLD), to_jsonb(NEW));
        RETURN NEW;
    ELSE
        INSERT INTO audit_log (table_name, op, row_id, new_row)
        VALUES (TG_TABLE_NAME, 'I', NEW.id, to_jsonb(NEW));
        RETURN NEW;
    END IF;
END;
$body$;
-- +goose StatementEnd

CREATE TRIGGER documents_audit
    AFTER INSERT OR UPDATE OR DELETE ON documents
    FOR EACH ROW EXECUTE FUNCTION audit_row_change();

CREATE TRIGGER users_audit_email
    AFTER UPDATE OF email ON users
    FOR EACH ROW
    WHEN (OLD.email IS DISTINCT FROM NEW.email)
    EXECUTE PROCEDURE audit_row_change();

-- +goose Down
DROP TRIGGER IF EXISTS users_audit_email ON users;
DROP TRIGGER IF EXISTS documents_audit ON documents;
DROP FUNCTION IF EXISTS audit_row_change();
DROP TABLE audit_log;
