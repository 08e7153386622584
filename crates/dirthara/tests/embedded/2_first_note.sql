INSERT INTO notes (body) VALUES ('embedded');
