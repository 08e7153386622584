DROP TABLE comments;
DROP TABLE posts;
