-- +goose Up
-- +goose NO TRANSACTION
-- Backfill in batches so that no single statement holds row locks for long.
-- +goose StatementBegin
DO $$
DECLARE
    batch_size constant integer := 5000;
    updated    integer;
BEGIN
    LOOP
        UPDATE users u
           SET email = lower(u.email)
         WHERE u.id IN (
               SELECT id FROM users
                WHERE email <> lower(email)
                LIMIT batch_size
                FOR UPDATE SKIP LOCKED)
        ;
        GET DIAGNOSTICS updated = ROW_COUNT;
        EXIT WHEN updated = 0;
        COMMIT;
    END LOOP;
END
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- +goose Down
SELECT 'no-op';
