ALTER TABLE products
    ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (
        setweight(to_tsvector('english', coalesce(name, '')), 'A') ||
        setweight(to_tsvector('english', coalesce(description, '')), 'B')
    ) STORED;

CREATE INDEX products_search_idx ON products USING gin (search_vector);
CREATE INDEX products_attributes_idx ON products USING gin (attributes jsonb_path_ops);
CREATE INDEX products_active_name_idx ON products (name) WHERE archived_at IS NULL;
