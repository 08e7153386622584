DROP FUNCTION IF EXISTS track_updated_at(_tbl regclass);
DROP FUNCTION IF EXISTS touch_updated_at();
