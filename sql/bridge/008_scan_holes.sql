-- Open holes the scan has kept for a while (docs/design.md, "Contract v2: finding late commits":
-- what a start costs is bounded by the holes open): an id a transaction has held for seconds or
-- days (an XA transaction left PREPARED, a pool that leaked an open transaction) is recorded here,
-- in the same transaction as the scan's cursor, and scan_floor moves on past it. A scan that starts
-- again rebuilds its open holes from these rows and the ids above scan_floor, so a session starts
-- in O(open holes), not O(rows since the oldest one). A row here may cover ids resolved since
-- (versioned, quarantined, never used): the scan finds that out again and deletes the row once none
-- of its ids is open.

CREATE TABLE IF NOT EXISTS outbox_scan_holes (
  source    VARCHAR(64)     NOT NULL,
  first_id  BIGINT UNSIGNED NOT NULL,
  last_id   BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (source, first_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
