ALTER TABLE user_sessions
  ADD CONSTRAINT fk_user_sessions_customer FOREIGN KEY (user_id) REFERENCES customers (id) ON DELETE CASCADE;
ALTER TABLE order_items CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
ALTER TABLE audit_log ENGINE=InnoDB;
ALTER TABLE orders ALTER COLUMN currency SET DEFAULT 'USD';
ALTER TABLE orders ALTER COLUMN coupon_code DROP DEFAULT;
ALTER TABLE customers AUTO_INCREMENT = 500000, COMMENT = 'Registered customers (see docs/customers.md)';
OPTIMIZE TABLE user_sessions;
