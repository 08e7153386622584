-- Helpers shared by every table that tracks its own modification time.

CREATE OR REPLACE FUNCTION touch_updated_at() RETURNS trigger AS $$
BEGIN
    IF NEW IS DISTINCT FROM OLD AND NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
        NEW.updated_at := current_timestamp;
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION track_updated_at(target regclass) RETURNS void AS $func$
BEGIN
    EXECUTE format('CREATE TRIGGER touch_updated_at BEFORE UPDATE ON %s
                    FOR EACH ROW EXECUTE PROCEDURE touch_updated_at()', target);
END;
$func$ LANGUAGE plpgsql;
