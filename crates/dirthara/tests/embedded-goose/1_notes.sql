-- +goose Up
-- +goose ENVSUB ON
CREATE TABLE ${DIRTHARA_EMBEDDED_GOOSE_TABLE:-notes} (id INTEGER);
-- +goose ENVSUB OFF

-- +goose Down
DROP TABLE notes;
