-- An epoch bump records the new epoch at once and the leader finishes it (docs/design.md,
-- "Reconcile"): once nothing it sent is in flight, it reads the stream's tip and moves the versions
-- on, so a message the stream stored after the bump was asked for keeps its version and its row is
-- not published again. bump_from_epoch: the epoch whose versions are still to be moved on (NULL:
-- no bump is pending). outbox_epoch_history's versions_after and stream_seq are written then.

ALTER TABLE outbox_source_state
  ADD COLUMN bump_from_epoch BIGINT UNSIGNED NULL AFTER epoch;
