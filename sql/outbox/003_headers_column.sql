-- online: adds a column no running bridge reads, so `migrate` applies it while bridges run.
-- More headers for each message (README, "Subjects and headers"): a JSON object of name -> string,
-- e.g. the producer's W3C trace context:
--   INSERT INTO {{outbox_table}} (entity_type, entity_key, op, payload, headers)
--   VALUES ('account', '42', 'upsert', '{"id":42}',
--           JSON_OBJECT('traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'));
-- NULL (the default) or {} adds none. A bridge older than this file ignores the column: write
-- headers once every bridge of the table runs a version that reads them.
-- Added in place, without copying the table (an instant ADD COLUMN on MariaDB 10.3+ and MySQL
-- 8.0.12+). The ALTER still needs the table's metadata lock for a moment, and while it waits for a
-- long transaction on the table every new write waits behind it: it gives up after 10 s instead
-- (run migrate again).

SET SESSION lock_wait_timeout = 10;
SET @outbox_sql = IF((SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{{outbox_table}}' AND COLUMN_NAME = 'headers') = 0,
  'ALTER TABLE `{{outbox_table}}` ADD COLUMN headers JSON NULL', 'DO 0');
PREPARE outbox_stmt FROM @outbox_sql;
EXECUTE outbox_stmt;
DEALLOCATE PREPARE outbox_stmt;
SET SESSION lock_wait_timeout = @@GLOBAL.lock_wait_timeout;
