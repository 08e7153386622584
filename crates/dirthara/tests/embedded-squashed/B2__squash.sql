-- dirthara:squashes 1,2
CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
