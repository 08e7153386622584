-- +goose Up
CREATE TABLE articles (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  customer_id BIGINT UNSIGNED NULL,
  title VARCHAR(200) NOT NULL,
  body MEDIUMTEXT NOT NULL,
  tags JSON NOT NULL,
  published TINYINT(1) NOT NULL DEFAULT 0,
  published_at DATETIME NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

ALTER TABLE articles ADD FULLTEXT INDEX ft_articles_title_body (title, body);
CREATE UNIQUE INDEX uq_articles_title USING BTREE ON articles (title(100));
SET FOREIGN_KEY_CHECKS = 0;
ALTER TABLE articles ADD CONSTRAINT fk_articles_customer FOREIGN KEY (customer_id) REFERENCES customers (id) ON DELETE SET NULL, ALGORITHM=INPLACE;
SET FOREIGN_KEY_CHECKS = 1;

-- +goose Down
DROP TABLE articles;
