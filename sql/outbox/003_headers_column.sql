-- online: adds a column no running bridge reads, so `migrate` applies it while bridges run.
-- More headers for each message (ARCHITECTURE.md section 4): a JSON object of name -> string,
-- e.g. the producer's W3C trace context:
--   INSERT INTO {{outbox_table}} (entity_type, entity_key, op, payload, headers)
--   VALUES ('account', '42', 'upsert', '{"id":42}',
--           JSON_OBJECT('traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'));
-- NULL (the default) or {} adds none. Added in place, without copying the table or blocking its
-- writers (an instant ADD COLUMN on MariaDB 10.3+ and MySQL 8.0.29+).

SET @outbox_sql = IF((SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{{outbox_table}}' AND COLUMN_NAME = 'headers') = 0,
  'ALTER TABLE `{{outbox_table}}` ADD COLUMN headers JSON NULL, LOCK = NONE', 'DO 0');
PREPARE outbox_stmt FROM @outbox_sql;
EXECUTE outbox_stmt;
DEALLOCATE PREPARE outbox_stmt;
