-- Who stands for each source (issue 11: sources spread over instances). Every bridge instance
-- configured with a source renews its row here on each lease round trip, leader or standby, while
-- it can publish, and deletes it when it stops. A free lease goes to the candidate leading the
-- fewest sources of this database, and a leader hands a source to a candidate leading two fewer:
-- with N instances and M sources each leads about M/N. Only a candidate renewed lately
-- (renewed_at) is left a free lease, and only one that has stood a TTL since it (re)appeared
-- (stood_since) is handed a source, so an instance that crash-loops or flaps draws none; rows of
-- instances that died expire with the lease TTL, and the lease round trip deletes the ones an hour
-- old.

CREATE TABLE IF NOT EXISTS outbox_bridge_candidate (
  source      VARCHAR(64)  NOT NULL,
  holder_id   VARCHAR(255) NOT NULL,
  stood_since TIMESTAMP(6) NOT NULL,
  renewed_at  TIMESTAMP(6) NOT NULL,
  expires_at  TIMESTAMP(6) NOT NULL,
  PRIMARY KEY (source, holder_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
