ALTER TABLE products ADD CONSTRAINT products_price_positive CHECK (price_cents > 0);
ALTER TABLE products ADD CONSTRAINT products_currency_upper CHECK (currency = upper(currency)) NOT VALID;
