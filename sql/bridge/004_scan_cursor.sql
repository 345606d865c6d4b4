-- Contract v2 (docs/design.md, "Contract v2: finding late commits"): where the scan for new outbox
-- rows stands. scan_cursor: the highest outbox id read past; scan_floor: every id at or below it is
-- resolved for good (versioned, quarantined, rolled back or never used). NULL until the bridge
-- first scans the source (it then starts below the lowest row without a version).
--
-- Edited after it shipped (issue 19), to run on MySQL 8 too: it was one
--   ALTER TABLE outbox_source_state ADD COLUMN IF NOT EXISTS scan_cursor ..., ADD COLUMN IF NOT EXISTS scan_floor ...;
-- which is MariaDB-only syntax. It now asks information_schema which of the two columns are
-- missing and runs one ALTER adding just those (CONCAT_WS skips the NULL of a column that is
-- there; no ALTER when both are): on MariaDB the effect is unchanged, and a database that already
-- ran this file never runs it again (migrate records file names in outbox_schema_migrations).

SET @outbox_sql = CONCAT_WS(', ',
  IF((SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'outbox_source_state' AND COLUMN_NAME = 'scan_cursor') = 0, 'ADD COLUMN scan_cursor BIGINT UNSIGNED NULL AFTER published_stream_seq', NULL),
  IF((SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'outbox_source_state' AND COLUMN_NAME = 'scan_floor') = 0, 'ADD COLUMN scan_floor  BIGINT UNSIGNED NULL AFTER scan_cursor', NULL));
SET @outbox_sql = IF(@outbox_sql = '', 'DO 0', CONCAT('ALTER TABLE outbox_source_state ', @outbox_sql));
PREPARE outbox_stmt FROM @outbox_sql;
EXECUTE outbox_stmt;
DEALLOCATE PREPARE outbox_stmt;
