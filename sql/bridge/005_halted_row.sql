-- The row a source halted on, when one row is the cause, kept apart from halted_reason (which is
-- for people): halted_row_id, and halted_version when that row had been assigned a version while
-- it could still be published (the server refuses it now). Quarantining that row, or fixing it,
-- resumes the source. A halt recorded before this file named the row only in its text: it is
-- read from there once.
--
-- Edited after it shipped (issue 19), to run on MySQL 8 too: its ALTER added the two columns with
-- ADD COLUMN IF NOT EXISTS, which is MariaDB-only syntax. It now asks information_schema which of
-- them are missing and runs one ALTER adding just those (CONCAT_WS skips the NULL of a column that
-- is there; no ALTER when both are): on MariaDB the effect is unchanged, and a database that
-- already ran this file never runs it again (migrate records file names in
-- outbox_schema_migrations). The UPDATEs are as they were.

SET @outbox_sql = CONCAT_WS(', ',
  IF((SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'outbox_source_state' AND COLUMN_NAME = 'halted_row_id') = 0, 'ADD COLUMN halted_row_id  BIGINT UNSIGNED NULL AFTER halted_reason', NULL),
  IF((SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'outbox_source_state' AND COLUMN_NAME = 'halted_version') = 0, 'ADD COLUMN halted_version BIGINT UNSIGNED NULL AFTER halted_row_id', NULL));
SET @outbox_sql = IF(@outbox_sql = '', 'DO 0', CONCAT('ALTER TABLE outbox_source_state ', @outbox_sql));
PREPARE outbox_stmt FROM @outbox_sql;
EXECUTE outbox_stmt;
DEALLOCATE PREPARE outbox_stmt;

UPDATE outbox_source_state
  SET halted_row_id = CAST(SUBSTRING_INDEX(SUBSTRING(halted_reason, LENGTH('poison row id=') + 1), ':', 1) AS UNSIGNED)
  WHERE halted_reason LIKE 'poison row id=%' AND halted_row_id IS NULL;

UPDATE outbox_source_state
  SET halted_version = CAST(SUBSTRING_INDEX(SUBSTRING(halted_reason, LENGTH('unpublishable version ') + 1), ' ', 1) AS UNSIGNED),
      halted_row_id = CAST(SUBSTRING_INDEX(SUBSTRING(halted_reason, LOCATE('(row id=', halted_reason) + LENGTH('(row id=')), ')', 1) AS UNSIGNED)
  WHERE halted_reason LIKE 'unpublishable version % (row id=%' AND halted_row_id IS NULL;
