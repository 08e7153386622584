-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION slugify(input VARCHAR(255))
RETURNS VARCHAR(255)
DETERMINISTIC
NO SQL
BEGIN
  DECLARE result VARCHAR(255) DEFAULT LOWER(TRIM(input));
  SET result = REPLACE(result, ' ', '-');
  SET result = REPLACE(result, '''', '');
  WHILE LOCATE('--', result) > 0 DO
    SET result = REPLACE(result, '--', '-');
  END WHILE;
  RETURN result;
END;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION IF EXISTS slugify;
