-- The course's tables behind its home page and "my page" (004 notes):
-- the shop-visit notes (tb_blog) and the user details (tb_user_info),
-- column for column, written as 00001 is for MySQL 8 and MariaDB 10.11.
-- The hot list reads tb_blog by likes, so it has an index on them.

-- +goose Up
CREATE TABLE tb_blog (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  shop_id     BIGINT          NOT NULL,
  user_id     BIGINT UNSIGNED NOT NULL,
  title       VARCHAR(255)    NOT NULL,
  images      VARCHAR(2048)   NOT NULL,
  content     VARCHAR(2048)   NOT NULL,
  liked       INT UNSIGNED    NULL DEFAULT 0,
  comments    INT UNSIGNED    NULL DEFAULT NULL,
  create_time TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP,
  update_time TIMESTAMP       NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (id),
  KEY idx_liked (liked, id),
  KEY idx_user (user_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

CREATE TABLE tb_user_info (
  user_id     BIGINT UNSIGNED  NOT NULL,
  city        VARCHAR(64)      NULL DEFAULT '',
  introduce   VARCHAR(128)     NULL DEFAULT NULL,
  fans        INT UNSIGNED     NULL DEFAULT 0,
  followee    INT UNSIGNED     NULL DEFAULT 0,
  gender      TINYINT UNSIGNED NULL DEFAULT 0,
  birthday    DATE             NULL DEFAULT NULL,
  credits     INT UNSIGNED     NULL DEFAULT 0,
  level       TINYINT UNSIGNED NULL DEFAULT 0,
  create_time TIMESTAMP        NOT NULL DEFAULT CURRENT_TIMESTAMP,
  update_time TIMESTAMP        NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

-- +goose Down
DROP TABLE tb_user_info;
DROP TABLE tb_blog;
