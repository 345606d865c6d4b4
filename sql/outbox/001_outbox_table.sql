-- One outbox table per source, in the producer's own database (docs/design.md, "The tables").
-- {{outbox_table}} is replaced by the source's outbox_table, a validated identifier.
--
-- Producer rule (README, "The producer rule"): in the same transaction, after the business write,
--   INSERT INTO {{outbox_table}} (entity_type, entity_key, op, payload)
--   SELECT 'account', id, 'upsert', JSON_OBJECT('id', id, 'displayName', display_name)
--   FROM accounts WHERE id = ?;

CREATE TABLE IF NOT EXISTS `{{outbox_table}}` (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  entity_type VARCHAR(64)  NOT NULL,
  entity_key  VARCHAR(191) NOT NULL,
  op          VARCHAR(16)  NOT NULL DEFAULT 'upsert',
  payload     JSON NULL,
  created_at  TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  version     BIGINT UNSIGNED NULL,
  UNIQUE KEY uk_version (version),
  KEY idx_pending (version, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
