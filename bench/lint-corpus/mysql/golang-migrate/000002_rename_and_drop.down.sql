ALTER TABLE customers RENAME INDEX idx_customers_status_since TO idx_customers_status_created;
ALTER TABLE user_sessions ADD COLUMN ip VARBINARY(16) NULL AFTER client_ua;
RENAME TABLE user_sessions TO sessions;
ALTER TABLE sessions DROP INDEX idx_sessions_user_expires, ADD INDEX idx_sessions_expires (expires_at);
ALTER TABLE sessions RENAME COLUMN client_ua TO user_agent;
