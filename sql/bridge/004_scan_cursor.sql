-- Contract v2 (ARCHITECTURE.md section 3a): where the scan for new outbox rows stands.
-- scan_cursor: the highest outbox id read past; scan_floor: every id at or below it is resolved
-- for good (versioned, quarantined, rolled back or never used). NULL until the bridge first
-- scans the source (it then starts below the lowest row without a version).

ALTER TABLE outbox_source_state
  ADD COLUMN IF NOT EXISTS scan_cursor BIGINT UNSIGNED NULL AFTER published_stream_seq,
  ADD COLUMN IF NOT EXISTS scan_floor  BIGINT UNSIGNED NULL AFTER scan_cursor;
