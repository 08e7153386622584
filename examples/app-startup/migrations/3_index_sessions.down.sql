DROP INDEX sessions_account;
