DROP INDEX posts_tags_idx;
DROP INDEX posts_published_created_idx;
DROP INDEX posts_slug_key;
ALTER TABLE posts DROP COLUMN slug;
