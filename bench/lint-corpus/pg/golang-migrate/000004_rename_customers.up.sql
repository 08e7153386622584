BEGIN;
LOCK TABLE customers, events IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE customers RENAME TO clients;
ALTER TABLE clients RENAME COLUMN name TO legal_name;
ALTER TABLE clients RENAME CONSTRAINT customers_pkey TO clients_pkey;
ALTER SEQUENCE customers_id_seq RENAME TO clients_id_seq;
ALTER TABLE events RENAME COLUMN customer_id TO client_id;
-- Keep the old name readable for the services that have not been redeployed yet.
CREATE VIEW customers AS SELECT id, legal_name AS name, preferred_payment, created_at FROM clients;
COMMIT;
