ALTER TABLE orders
  ADD INDEX idx_orders_customer_placed (customer_id, placed_at),
  ALGORITHM=INPLACE, LOCK=NONE;

CREATE INDEX idx_orders_status ON orders (status) ALGORITHM=INPLACE LOCK=NONE;
