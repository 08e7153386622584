ALTER TABLE events ADD CONSTRAINT events_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES customers (id);
ALTER TABLE customers ADD COLUMN external_ref text UNIQUE;
CREATE TABLE sessions_old (token text PRIMARY KEY, customer_id integer NOT NULL, expires_at timestamptz NOT NULL);
