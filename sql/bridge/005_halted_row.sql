-- The row a source halted on, when one row is the cause, kept apart from halted_reason (which is
-- for people): halted_row_id, and halted_version when that row had been assigned a version while
-- it could still be published (the server refuses it now). Quarantining that row, or fixing it,
-- resumes the source. A halt recorded before this file named the row only in its text: it is
-- read from there once.

ALTER TABLE outbox_source_state
  ADD COLUMN IF NOT EXISTS halted_row_id  BIGINT UNSIGNED NULL AFTER halted_reason,
  ADD COLUMN IF NOT EXISTS halted_version BIGINT UNSIGNED NULL AFTER halted_row_id;

UPDATE outbox_source_state
  SET halted_row_id = CAST(SUBSTRING_INDEX(SUBSTRING(halted_reason, LENGTH('poison row id=') + 1), ':', 1) AS UNSIGNED)
  WHERE halted_reason LIKE 'poison row id=%' AND halted_row_id IS NULL;

UPDATE outbox_source_state
  SET halted_version = CAST(SUBSTRING_INDEX(SUBSTRING(halted_reason, LENGTH('unpublishable version ') + 1), ' ', 1) AS UNSIGNED),
      halted_row_id = CAST(SUBSTRING_INDEX(SUBSTRING(halted_reason, LOCATE('(row id=', halted_reason) + LENGTH('(row id=')), ')', 1) AS UNSIGNED)
  WHERE halted_reason LIKE 'unpublishable version % (row id=%' AND halted_row_id IS NULL;
