package outbox

import (
	"context"
	"strconv"
	"time"
)

// The replica's verifying (docs/consumers.md section 4): a summary asked now and then, handed to
// the verifier (verify.go), and what it says in lines, counters and re-bootstraps.

// fetchSummary is ?summary=true: the snapshot without its records, and which read it is.
func (r *Replica) fetchSummary(ctx context.Context) (*ServedSummary, error) {
	res, _, err := r.get(ctx, true)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	s, err := ReadSnapshot(res.Body, func(*SnapshotHeader, []string, []SnapshotRecord) error { return nil }, false, 0)
	if err != nil {
		return nil, retryable("summary rejected: %v", err)
	}
	freshFor, _ := strconv.ParseInt(res.Header.Get("Outbox-Summary-Fresh-For"), 10, 64)
	if freshFor < 0 {
		freshFor = 0
	}
	r.mu.Lock()
	r.sourceAt = s.Watermark
	r.mu.Unlock()
	return &ServedSummary{*s, res.Header.Get("Outbox-Summary-Read-At"), time.Duration(freshFor) * time.Millisecond}, nil
}

// verify asks ?summary=true and hands it to the verifier; true when a bootstrap is needed. idle:
// nothing arrived in this step.
func (r *Replica) verify(ctx context.Context, idle bool) (bool, error) {
	r.verifier.asking(time.Now()) // a bridge that does not answer is asked again an interval later
	s, err := r.fetchSummary(ctx)
	if err != nil {
		return false, err
	}
	row := r.row
	if s.Epoch != row.Epoch {
		if s.Epoch < row.Epoch {
			return false, nil
		}
		r.count(func(c *Counters) { c.EpochChanges++ })
		r.say("epoch changed from %d to %d: re-bootstrapping", row.Epoch, s.Epoch)
		return true, nil
	}
	if s.StreamName != row.StreamName {
		r.count(func(c *Counters) { c.LostStreams++ })
		r.say("the source now publishes to stream %s, not %s: re-bootstrapping", s.StreamName, row.StreamName)
		return true, nil
	}
	if idle && s.Watermark > row.AppliedVersion {
		// The source is ahead and nothing arrived: a stream that no longer holds the next sequence
		// will not send it (a purge or max_age on a quiet source shows no gap).
		p, err := r.problem(row.StreamName, row.StreamSeq+1)
		if err != nil {
			return false, err
		}
		if p != nil {
			r.count(func(c *Counters) { c.LostStreams++ })
			r.say("%s: re-bootstrapping", p.why)
			return true, nil
		}
	}
	return r.judged(r.verifier.offer(s, time.Now(), idle)), nil
}

// judged: what the verifier said, in lines and counters; true when a bootstrap is needed.
func (r *Replica) judged(v verdict) bool {
	switch v.kind {
	case verdictVerified:
		r.mu.Lock()
		r.counters.Verifications++
		first := r.lastVerified != v.version || r.counters.Verifications == 1
		r.lastVerified = v.version // before the line: the CLI dumps on it
		r.mu.Unlock()
		if first {
			state, ok := r.verifier.at(v.version)
			if !ok {
				state = stateOf(r.row)
			}
			r.say("verified at version %d: %d records, checksum %s", v.version, state.RecordCount,
				FormatChecksum(state.Sum))
		}
		return false
	case verdictMismatch:
		r.count(func(c *Counters) { c.Verifications++; c.Mismatches++ })
		// A summary may reflect changes committed but not yet published (invariant 6): only a
		// difference that stays over distinct reads of the table means the replica is wrong.
		if v.inARow < 2 {
			return false
		}
		rebootstrap := v.inARow >= r.opts.MismatchesBeforeRebootstrap
		tail := "; checking again"
		if rebootstrap {
			tail = ": re-bootstrapping"
		}
		r.say("checksum differs at version %d: replica %s (%d records), source %s (%d records, watermark %d)%s",
			v.state.Version, FormatChecksum(v.state.Sum), v.state.RecordCount, v.summary.Checksum,
			v.summary.RecordCount, v.summary.Watermark, tail)
		return rebootstrap
	}
	return false
}

// LastVerifiedVersion is the version whose checksum the source last confirmed.
func (r *Replica) LastVerifiedVersion() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastVerified
}
