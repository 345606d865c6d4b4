-- Operators pause and resume a source through the admin API; every instance honours it.

ALTER TABLE outbox_source_state ADD COLUMN IF NOT EXISTS paused TINYINT(1) NOT NULL DEFAULT 0 AFTER halted_reason;
