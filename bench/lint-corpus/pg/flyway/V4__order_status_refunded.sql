-- flyway:executeInTransaction=false
ALTER TYPE order_status ADD VALUE IF NOT EXISTS 'refunded' AFTER 'shipped';
