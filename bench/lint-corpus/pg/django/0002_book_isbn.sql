BEGIN;
--
-- Add field isbn to book
--
ALTER TABLE "library_book" ADD COLUMN "isbn" varchar(13) DEFAULT '' NOT NULL;
ALTER TABLE "library_book" ALTER COLUMN "isbn" DROP DEFAULT;
--
-- Alter field title on book
--
ALTER TABLE "library_book" ALTER COLUMN "title" TYPE varchar(500);
COMMIT;
