-- +goose Up
-- SET NOT NULL without a long ACCESS EXCLUSIVE scan: prove it with a validated CHECK first.
SET lock_timeout = '3s';
ALTER TABLE users ADD CONSTRAINT users_email_not_null CHECK (email IS NOT NULL) NOT VALID;
ALTER TABLE users VALIDATE CONSTRAINT users_email_not_null;
ALTER TABLE users ALTER COLUMN email SET NOT NULL;
ALTER TABLE users DROP CONSTRAINT users_email_not_null;
RESET lock_timeout;

-- +goose Down
ALTER TABLE users ALTER COLUMN email DROP NOT NULL;
