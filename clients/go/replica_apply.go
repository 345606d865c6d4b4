package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
)

// The replica's bootstrap (docs/consumers.md section 2) and the rules for each message (section 3).

// Bootstrap fetches the snapshot, streams it into the store, checks it, and follows the stream
// after it.
func (r *Replica) Bootstrap(ctx context.Context) error {
	r.unfollow()
	// Before the snapshot: no download while nats-server cannot be reached.
	if err := r.connect(); err != nil {
		return err
	}
	res, _, err := r.get(ctx, false)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var writing Bootstrap
	summary, err := ReadSnapshot(res.Body, func(h *SnapshotHeader, columns []string, batch []SnapshotRecord) error {
		if writing == nil {
			var err error
			if writing, err = r.store.BeginBootstrap(ctx, r.opts.Source, h); err != nil {
				return err
			}
		}
		return writing.Records(ctx, columns, batch)
	}, true, r.opts.SnapshotBatch)
	if err != nil {
		if writing != nil {
			_ = writing.Abort(context.Background())
		}
		var rejected *SnapshotRejected
		if !errors.As(err, &rejected) {
			return retryable("%v", err)
		}
		r.count(func(c *Counters) { c.RejectedSnapshots++ })
		r.say("snapshot rejected: %s; retrying", rejected.Reason)
		return retryable("snapshot rejected: %s", rejected.Reason)
	}
	if writing == nil {
		if writing, err = r.store.BeginBootstrap(ctx, r.opts.Source, &summary.SnapshotHeader); err != nil {
			return err
		}
	}
	row := InboxRow{Epoch: summary.Epoch, AppliedVersion: summary.Watermark, StreamName: summary.StreamName,
		StreamSeq: summary.StreamSeq, Key: summary.Key, Columns: summary.Columns, Numeric: summary.Numeric,
		Sum: summary.Sum, RecordCount: summary.RecordCount}
	stored, err := writing.Commit(ctx, row)
	if err != nil {
		_ = writing.Abort(context.Background())
		return err
	}
	changedEpoch := r.row != nil && r.row.Epoch != row.Epoch
	r.setRow(&stored)
	r.loaded = true
	r.bootstrapNext = false
	r.mu.Lock()
	r.lastVerified = row.AppliedVersion
	r.counters.Bootstraps++
	first := r.counters.Bootstraps == 1
	r.mu.Unlock()
	r.verifier.reset(stateOf(&stored), time.Now())
	what := "re-bootstrapped"
	if first {
		what = "bootstrapped"
	} else if changedEpoch {
		what = "re-bootstrapped in a new epoch"
	}
	r.say("%s: epoch %d, watermark %d, %d records, checksum %s; following %s from sequence %d", what, row.Epoch,
		row.AppliedVersion, row.RecordCount, FormatChecksum(row.Sum), row.StreamName, row.StreamSeq+1)
	problem, err := r.follow(row.StreamName, row.StreamSeq+1)
	if err != nil {
		return err
	}
	if problem != nil {
		// Missing: the bridge creates it at its next publish. Otherwise the snapshot is older than
		// the stream (read before the bridge recreated it, or before messages expired): the next
		// step bootstraps again, after Run's backoff.
		r.awaiting = nil
		if problem.missing {
			r.awaiting = &awaiting{row.StreamName, time.Now()}
		}
		return retryable("the snapshot's %s", problem.why)
	}
	return nil
}

// applyMessage: the rules of docs/consumers.md section 3; true when a bootstrap is needed.
func (r *Replica) applyMessage(ctx context.Context, m *nats.Msg) (bool, error) {
	row := *r.row
	meta, err := m.Metadata()
	if err != nil {
		return false, retryable("a message of the stream without its metadata: %v", err)
	}
	seq := meta.Sequence.Stream
	// Missing or no number: 0 (strtoull's reading in src/replica/replica.cpp), so an older epoch or
	// a version applied already, skipped. An error would be retried for ever on the same message.
	epoch := headerNumber(m, "Outbox-Epoch")
	version := headerNumber(m, "Outbox-Version")
	switch RuleFor(row.Epoch, row.AppliedVersion, epoch, version) {
	case RuleNewEpoch:
		r.count(func(c *Counters) { c.EpochChanges++ })
		r.say("epoch changed from %d to %d at version %d: re-bootstrapping", row.Epoch, epoch, version)
		return true, nil
	case RuleSkip:
		r.count(func(c *Counters) { c.SkippedDuplicates++ }) // already reflected in what we have
		// Followed past it, in memory only (the store's row is matched by version, not sequence): once
		// max_age expires it, the stream still holds what comes next, and watch sees no lost stream.
		row.StreamSeq = seq
		r.setRow(&row)
		return false, nil
	case RuleGap:
		r.count(func(c *Counters) { c.Gaps++ })
		r.say("gap: expected version %d, got %d (sequence %d): re-bootstrapping", row.AppliedVersion+1, version, seq)
		return true, nil
	}
	change, from, problem := changeOf(m, r.opts.Source, row, epoch, version, seq)
	if problem != "" {
		r.say("version %d: %s: re-bootstrapping", version, problem)
		return true, nil
	}
	next, err := r.store.Apply(ctx, change, from)
	if err != nil {
		// What the store holds may not be what is in memory (a COMMIT without an answer): it is
		// read again at the next step, never guessed.
		r.loaded = false
		r.unfollow()
		return false, retryable("the inbox: %v", err)
	}
	if next == nil {
		// Another consumer of this source moved the inbox row: start again from what it holds.
		r.say("the inbox row moved past version %d under this consumer: reading it again", row.AppliedVersion)
		r.loaded = false
		r.unfollow()
		return false, nil
	}
	r.setRow(next)
	r.count(func(c *Counters) { c.Applied++ })
	need := r.judged(r.verifier.applied(stateOf(next), time.Now()))
	if r.opts.OnApplied != nil {
		// Its error is reported and retried like any step's, but the change is committed: the
		// callback is not called for it again, and a bootstrap decided on it still comes.
		if err := r.opts.OnApplied(ctx, change); err != nil {
			r.bootstrapNext = need
			return false, err
		}
	}
	return need, nil
}

// changeOf is the change m carries, applied on top of row (whose epoch and version the rules
// have already checked): from is row, with the columns the first change tells when the snapshot
// was empty. A payload that is not a JSON object is a problem.
func changeOf(m *nats.Msg, source string, row InboxRow, epoch, version, seq uint64) (*Change, InboxRow, string) {
	from := row
	c := &Change{Source: source, Epoch: epoch, Version: version, StreamSeq: seq, Subject: m.Subject,
		EntityType: m.Header.Get("Outbox-Entity-Type"), Key: m.Header.Get("Outbox-Entity-Key"),
		Delete: m.Header.Get("Outbox-Op") == "delete", Payload: m.Data, Headers: m.Header}
	if !c.Delete {
		fields, err := ParseRecord(m.Data)
		if err != nil {
			return nil, from, "payload is " + err.Error()
		}
		if len(from.Columns) == 0 {
			// The snapshot was empty: the first change tells the columns.
			from.Columns, from.Numeric = nil, nil
			for _, f := range fields {
				from.Columns = append(from.Columns, f.Name)
				from.Numeric = append(from.Numeric, f.Numeric)
			}
		}
		// A name given twice: the last one counts, as in a JSON object read into a map.
		byName := make(map[string]Value, len(fields))
		for _, f := range fields {
			byName[f.Name] = f.Text
		}
		c.Values = make([]Value, len(from.Columns))
		for i, name := range from.Columns {
			c.Values[i] = byName[name]
		}
	}
	c.Columns = from.Columns
	return c, from, ""
}
