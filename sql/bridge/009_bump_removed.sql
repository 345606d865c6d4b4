-- The versions an epoch bump's finish took from their rows (docs/design.md, "Reconcile"): assigned,
-- but not in the stream when the leader read its tip. A leader the bump fenced (frozen past its
-- lease, or the last session's publishes still in nats.c's buffer) may yet store some of them,
-- as the continuation of the old epoch's chain and only before the new epoch's first message.
-- Reconcile finds those messages past where the epoch began and gives their rows these versions
-- back, so no row is published again in the new epoch. Rows leave this table when given back, or
-- when a later bump finds the epoch published (no older chain can land after its messages).

CREATE TABLE IF NOT EXISTS outbox_bump_removed (
  source     VARCHAR(64)     NOT NULL,
  version    BIGINT UNSIGNED NOT NULL,
  outbox_id  BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (source, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
