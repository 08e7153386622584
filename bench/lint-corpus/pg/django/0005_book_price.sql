BEGIN;
--
-- Add field price to book
--
ALTER TABLE "library_book" ADD COLUMN "price" numeric(10, 2) NULL;
UPDATE "library_book" SET "price" = 0 WHERE "price" IS NULL;
--
-- Alter field price on book
--
ALTER TABLE "library_book" ALTER COLUMN "price" SET NOT NULL;
--
-- Alter field pages on book
--
ALTER TABLE "library_book" ALTER COLUMN "pages" TYPE bigint USING "pages"::bigint;
COMMIT;
