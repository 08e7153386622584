ALTER TABLE posts ADD COLUMN slug VARCHAR(120);
UPDATE posts SET slug = lower(regexp_replace(title, '[^a-zA-Z0-9]+', '-', 'g')) WHERE slug IS NULL;
ALTER TABLE posts ALTER COLUMN slug SET NOT NULL;
CREATE UNIQUE INDEX posts_slug_key ON posts (slug);
CREATE INDEX posts_published_created_idx ON posts (created_at DESC) WHERE published;
CREATE INDEX posts_tags_idx ON posts USING GIN (tags);
