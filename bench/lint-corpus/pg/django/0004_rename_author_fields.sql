BEGIN;
--
-- Rename field born on author to birth_date
--
ALTER TABLE "library_author" RENAME COLUMN "born" TO "birth_date";
--
-- Rename model Book_tags to BookTag
--
ALTER TABLE "library_book_tags" RENAME TO "library_booktag";
ALTER INDEX "library_book_tags_book_id_91cc03f4" RENAME TO "library_booktag_book_id_91cc03f4";
--
-- Remove field metadata from book
--
ALTER TABLE "library_book" DROP COLUMN "metadata" CASCADE;
COMMIT;
