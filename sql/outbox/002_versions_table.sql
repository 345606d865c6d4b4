-- Contract v2 (docs/design.md, "The tables" and "Contract v2"): versions live in a side table, one
-- narrow row per published outbox row, and the outbox table is append-only (producers INSERT, the
-- bridge never updates it). {{outbox_table}} is at most 55 characters, so this name fits.
--
-- Edited after it shipped (issue 19), to run on MySQL 8 too: the v1 move below dropped the
-- indexes with DROP INDEX IF EXISTS, which is MariaDB-only syntax. It now asks information_schema
-- which of uk_version and idx_pending are there and drops just those, with the column, in one
-- ALTER as before: on MariaDB the effect is unchanged, and a table that already ran this file
-- never runs it again (migrate records file names and tables in outbox_schema_migrations).

CREATE TABLE IF NOT EXISTS `{{outbox_table}}_versions` (
  version   BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  outbox_id BIGINT UNSIGNED NOT NULL,
  UNIQUE KEY uk_outbox_id (outbox_id)  -- one version per row: invariant 3 in the database
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- A v1 table keeps each row's version in a `version` column: move every version given so far,
-- then drop the column and its indexes. Stop every bridge first (`migrate` refuses while one
-- leads a source). Producers may keep inserting meanwhile: the copy is a consistent read (READ
-- COMMITTED takes no locks on the rows it reads), and their new rows are found by the scan
-- (outbox_source_state.scan_cursor starts unset).
SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;
SET @outbox_v1 = (SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{{outbox_table}}' AND COLUMN_NAME = 'version');
SET @outbox_sql = IF(@outbox_v1 > 0, 'INSERT IGNORE INTO `{{outbox_table}}_versions` (version, outbox_id) SELECT version, id FROM `{{outbox_table}}` WHERE version IS NOT NULL', 'DO 0');
PREPARE outbox_stmt FROM @outbox_sql;
EXECUTE outbox_stmt;
DEALLOCATE PREPARE outbox_stmt;
SET @outbox_sql = IF(@outbox_v1 > 0, CONCAT('ALTER TABLE `{{outbox_table}}` ', CONCAT_WS(', ',
  IF((SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{{outbox_table}}' AND INDEX_NAME = 'uk_version') > 0, 'DROP INDEX uk_version', NULL),
  IF((SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{{outbox_table}}' AND INDEX_NAME = 'idx_pending') > 0, 'DROP INDEX idx_pending', NULL),
  'DROP COLUMN version')), 'DO 0');
PREPARE outbox_stmt FROM @outbox_sql;
EXECUTE outbox_stmt;
DEALLOCATE PREPARE outbox_stmt;
