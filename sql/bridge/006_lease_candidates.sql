-- Who stands for each source (issue 11: sources spread over instances). Every bridge instance
-- configured with a source renews its row here on each lease round trip, leader or standby, and
-- deletes it when it stops. A free lease goes to the live candidate leading the fewest sources of
-- this database, and a leader hands a source to a candidate leading fewer: with N instances and
-- M sources each leads about M/N. Rows of instances that died expire with the lease TTL; the
-- lease round trip deletes the ones an hour old.

CREATE TABLE IF NOT EXISTS outbox_bridge_candidate (
  source     VARCHAR(64)  NOT NULL,
  holder_id  VARCHAR(255) NOT NULL,
  expires_at TIMESTAMP(6) NOT NULL,
  PRIMARY KEY (source, holder_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
