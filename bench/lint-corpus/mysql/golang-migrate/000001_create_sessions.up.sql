CREATE TABLE IF NOT EXISTS sessions (
    id          BINARY(16)      NOT NULL PRIMARY KEY,
    user_id     BIGINT UNSIGNED NOT NULL,
    data        JSON            NULL,
    user_agent  VARCHAR(512)    NULL,
    ip          VARBINARY(16)   NULL,
    expires_at  DATETIME(6)     NOT NULL,
    INDEX idx_sessions_user (user_id),
    INDEX idx_sessions_expires (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
