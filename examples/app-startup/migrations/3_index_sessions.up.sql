-- dirthara:no-transaction
CREATE INDEX CONCURRENTLY sessions_account ON sessions (account_id);
