-- Hand-written (atomic = False): build the unique index without blocking writes,
-- then promote it to a constraint.
CREATE UNIQUE INDEX CONCURRENTLY "library_book_isbn_uniq_idx" ON "library_book" ("isbn") WHERE "isbn" <> '';
ALTER TABLE "library_book" ADD CONSTRAINT "library_book_author_title_uniq" UNIQUE ("author_id", "title");
CREATE UNIQUE INDEX CONCURRENTLY "library_author_name_born_uniq" ON "library_author" ("name", "born");
ALTER TABLE "library_author" ADD CONSTRAINT "library_author_name_born_uniq" UNIQUE USING INDEX "library_author_name_born_uniq";
