-- +goose Up
-- MySQL 8.0 only: functional key parts, multi-valued indexes, invisible indexes.
ALTER TABLE customers ADD INDEX idx_customers_lower_email ((LOWER(email)));
CREATE INDEX idx_articles_tags ON articles ((CAST(tags->'$' AS CHAR(32) ARRAY)));
ALTER TABLE orders ALTER INDEX idx_orders_status INVISIBLE;
ALTER TABLE orders ADD COLUMN risk_score TINYINT UNSIGNED NOT NULL DEFAULT 0, ALGORITHM=INSTANT;
ALTER TABLE customers RENAME COLUMN full_name TO display_name, ALGORITHM=INSTANT;

-- +goose Down
ALTER TABLE customers RENAME COLUMN display_name TO full_name;
ALTER TABLE orders DROP COLUMN risk_score;
ALTER TABLE orders ALTER INDEX idx_orders_status VISIBLE;
DROP INDEX idx_articles_tags ON articles;
ALTER TABLE customers DROP INDEX idx_customers_lower_email;
