ALTER TABLE line_items
    ADD CONSTRAINT line_items_order_id_fkey
    FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE CASCADE NOT VALID;

ALTER TABLE line_items VALIDATE CONSTRAINT line_items_order_id_fkey;
