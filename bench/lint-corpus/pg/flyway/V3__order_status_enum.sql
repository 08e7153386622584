-- Turn the free-text status into a proper enum.
CREATE TYPE order_status AS ENUM ('pending', 'paid', 'shipped', 'cancelled');

ALTER TABLE orders ALTER COLUMN status DROP DEFAULT;
ALTER TABLE orders
    ALTER COLUMN status TYPE order_status USING status::order_status,
    ALTER COLUMN status SET DEFAULT 'pending';
