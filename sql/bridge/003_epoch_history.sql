-- Why each epoch began: `outbox-bridge epoch bump --reason` records it here.

CREATE TABLE IF NOT EXISTS outbox_epoch_history (
  source          VARCHAR(64)     NOT NULL,
  epoch           BIGINT UNSIGNED NOT NULL,
  reason          VARCHAR(1024)   NOT NULL,
  versions_after  BIGINT UNSIGNED NOT NULL,  -- the new epoch's versions start above this
  stream_seq      BIGINT UNSIGNED NOT NULL,  -- the stream's last sequence at the bump
  bumped_at       TIMESTAMP(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (source, epoch)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
