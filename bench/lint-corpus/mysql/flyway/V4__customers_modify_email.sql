-- Widen the email column: both sizes already use a 2-byte length prefix in utf8mb4.
ALTER TABLE customers MODIFY COLUMN email VARCHAR(320) NOT NULL;
ALTER TABLE customers MODIFY fullname VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL, ALGORITHM=INPLACE, LOCK=SHARED;
