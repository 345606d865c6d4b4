-- The bridge's own tables, once per database that hosts sources (docs/design.md, "The tables").

CREATE TABLE IF NOT EXISTS outbox_source_state (
  source               VARCHAR(64)     NOT NULL PRIMARY KEY,
  epoch                BIGINT UNSIGNED NOT NULL DEFAULT 1,
  assigned_through     BIGINT UNSIGNED NOT NULL DEFAULT 0,  -- highest version given to a row
  published_through    BIGINT UNSIGNED NOT NULL DEFAULT 0,  -- every version up to here is in the stream
  published_stream_seq BIGINT UNSIGNED NOT NULL DEFAULT 0,  -- the stream sequence of published_through
  halted_reason        VARCHAR(1024)   NULL,                -- set: the source publishes nothing
  updated_at           TIMESTAMP(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS outbox_bridge_lease (
  source      VARCHAR(64)     NOT NULL PRIMARY KEY,
  holder_id   VARCHAR(255)    NOT NULL,
  lease_epoch BIGINT UNSIGNED NOT NULL,
  acquired_at TIMESTAMP(6)    NOT NULL,
  expires_at  TIMESTAMP(6)    NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS outbox_quarantine (
  source         VARCHAR(64)     NOT NULL,
  outbox_id      BIGINT UNSIGNED NOT NULL,
  reason         VARCHAR(1024)   NOT NULL,
  quarantined_at TIMESTAMP(6)    NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (source, outbox_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
