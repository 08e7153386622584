ALTER TABLE orders
  ADD COLUMN shipping_country CHAR(2) AS (JSON_UNQUOTE(JSON_EXTRACT(shipping_address, '$.country'))) VIRTUAL,
  ADD INDEX idx_orders_shipping_country (shipping_country);

ALTER TABLE order_items
  ADD COLUMN line_total DECIMAL(12,2) GENERATED ALWAYS AS (qty * unit_price) STORED;
