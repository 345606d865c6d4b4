-- Operators pause and resume a source through the admin API; every instance honours it.
--
-- Edited after it shipped (issue 19), to run on MySQL 8 too: it was
--   ALTER TABLE outbox_source_state ADD COLUMN IF NOT EXISTS paused ... AFTER halted_reason;
-- which is MariaDB-only syntax. It now asks information_schema whether the column is there and
-- runs the same ALTER without IF NOT EXISTS only when it is not: on MariaDB the effect is
-- unchanged, and a database that already ran this file never runs it again (migrate records
-- file names in outbox_schema_migrations).

SET @outbox_sql = IF((SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'outbox_source_state' AND COLUMN_NAME = 'paused') = 0, 'ALTER TABLE outbox_source_state ADD COLUMN paused TINYINT(1) NOT NULL DEFAULT 0 AFTER halted_reason', 'DO 0');
PREPARE outbox_stmt FROM @outbox_sql;
EXECUTE outbox_stmt;
DEALLOCATE PREPARE outbox_stmt;
