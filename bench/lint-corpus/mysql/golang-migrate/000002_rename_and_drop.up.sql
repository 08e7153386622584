ALTER TABLE sessions RENAME COLUMN user_agent TO client_ua;
ALTER TABLE sessions DROP INDEX idx_sessions_expires, ADD INDEX idx_sessions_user_expires (user_id, expires_at);
RENAME TABLE sessions TO user_sessions;
ALTER TABLE user_sessions DROP COLUMN ip;
ALTER TABLE customers RENAME INDEX idx_customers_status_created TO idx_customers_status_since;
