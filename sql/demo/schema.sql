-- The demo domain of ADR-021: accounts and stocks, each with its outbox table (created by
-- `outbox-bridge migrate` from the demo config). Idempotent.

CREATE TABLE IF NOT EXISTS accounts (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  display_name VARCHAR(191) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS stocks (
  ticker       VARCHAR(16)  NOT NULL PRIMARY KEY,
  company_name VARCHAR(191) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
