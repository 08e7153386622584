-- flyway:executeInTransaction=false
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_account_created_idx
    ON orders (account_id, created_at DESC);

-- Only the open orders are looked up by the fulfilment worker.
CREATE INDEX CONCURRENTLY orders_pending_idx
    ON public.orders USING btree (placed_at)
    WHERE status = 'pending'::order_status;

CREATE UNIQUE INDEX CONCURRENTLY accounts_lower_email_idx ON accounts (lower(email::text));

DROP INDEX CONCURRENTLY IF EXISTS orders_account_id_idx;
