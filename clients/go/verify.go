package outbox

import (
	crand "crypto/rand"
	"encoding/binary"
	"math/rand"
	"time"
)

// Verifying a replica against the source (docs/consumers.md section 4), as src/replica/verifier.cpp
// does. The bridge reads the whole table for a summary at most once per its summary_interval and
// serves that read, at its own watermark, until the next; so the replica keeps its checksum at
// each of its last few hundred versions (24 bytes each) and compares a summary at the summary's
// watermark, or at a later version when it held changes not yet published. When none matches,
// only a difference that stays over distinct reads of the table in a row means the replica is
// wrong. Checks come every interval, ±20% (pods started together spread out); 0: never.

// ServedSummary is a summary as the bridge served it: its facts, and which read of the table it
// came from.
type ServedSummary struct {
	SnapshotSummary
	ReadAt   string        // Outbox-Summary-Read-At: names the read ("" from an older bridge)
	FreshFor time.Duration // Outbox-Summary-Fresh-For: until the bridge reads again
}

// VersionState is the replica's state at one version: what a summary at that watermark must say.
type VersionState struct {
	Version     uint64
	Sum         uint64
	RecordCount uint64
}

type verdictKind int

const (
	verdictNone verdictKind = iota
	verdictLater
	verdictVerified
	verdictMismatch
)

type verdict struct {
	kind    verdictKind
	version uint64          // verified: the version whose state the summary is
	state   VersionState    // mismatch: the replica's at the summary's watermark
	summary SnapshotSummary // mismatch
	inARow  int             // mismatch: distinct reads that differed, in a row
}

type verifier struct {
	interval        time.Duration
	size            int
	random          func() float64
	history         []VersionState // oldest first, versions one apart
	pending         *ServedSummary
	mismatchedReads []string
	nextAt          time.Time
}

func newVerifier(interval time.Duration, historySize int) *verifier {
	if historySize < 1 {
		historySize = 1
	}
	return &verifier{interval: interval, size: historySize, random: rand.New(rand.NewSource(jitterSeed())).Float64}
}

// jitterSeed: a seed of this verifier's own. Not math/rand's global source: go 1.19 leaves it at
// seed 1 unless someone seeds it, so replicas started together would check together.
func jitterSeed() int64 {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		return time.Now().UnixNano()
	}
	return int64(binary.LittleEndian.Uint64(b[:]))
}

func (v *verifier) enabled() bool          { return v.interval > 0 }
func (v *verifier) due(now time.Time) bool { return v.enabled() && !now.Before(v.nextAt) }
func (v *verifier) asking(now time.Time)   { v.nextAt = now.Add(v.jittered()) }
func (v *verifier) jittered() time.Duration {
	return time.Duration(float64(v.interval) * (0.8 + 0.4*v.random()))
}

// reset: a new state to verify from (a bootstrap, itself checked, or a resumed inbox row).
func (v *verifier) reset(state VersionState, now time.Time) {
	v.history = append(v.history[:0], state)
	v.pending = nil
	v.mismatchedReads = nil
	v.nextAt = now.Add(v.jittered())
}

func (v *verifier) at(version uint64) (VersionState, bool) {
	if len(v.history) == 0 || version < v.history[0].Version {
		return VersionState{}, false
	}
	i := version - v.history[0].Version
	if i >= uint64(len(v.history)) || v.history[i].Version != version {
		return VersionState{}, false
	}
	return v.history[i], true
}

func (v *verifier) match(s *SnapshotSummary) (uint64, bool) {
	for _, h := range v.history {
		if h.Version >= s.Watermark && h.Sum == s.Sum && h.RecordCount == s.RecordCount {
			return h.Version, true
		}
	}
	return 0, false
}

// applied: the state after a version applied. A pending summary it matches is verified; one the
// replica got far past (half the history) is judged.
func (v *verifier) applied(state VersionState, now time.Time) verdict {
	if n := len(v.history); n > 0 && state.Version <= v.history[n-1].Version {
		return verdict{}
	}
	v.history = append(v.history, state)
	if len(v.history) > v.size {
		v.history = append(v.history[:0], v.history[1:]...)
	}
	if v.pending == nil || state.Version < v.pending.Watermark {
		return verdict{}
	}
	if state.Sum == v.pending.Sum && state.RecordCount == v.pending.RecordCount {
		v.pending = nil
		return v.verified(state.Version, now)
	}
	if state.Version < v.pending.Watermark+uint64(v.size/2) {
		return verdict{}
	}
	p := v.pending
	v.pending = nil
	return v.judge(p, now)
}

// offer: a summary just read; idle: nothing is arriving.
func (v *verifier) offer(s *ServedSummary, now time.Time, idle bool) verdict {
	if s.Watermark < v.history[0].Version {
		// Read before the oldest state kept: ask again once the bridge reads again.
		v.pending = nil
		v.soon(s, now)
		return verdict{kind: verdictLater}
	}
	v.pending = s
	// Ahead of the replica, or not matched while changes still arrive: compared as they do (a
	// replica that stops getting them asks again within 30 s, which shows it the stall).
	stallCheck := 30*time.Second + time.Duration(float64(5*time.Second)*v.random())
	next := v.jittered()
	if stallCheck < next {
		next = stallCheck
	}
	v.nextAt = now.Add(next)
	if s.Watermark > v.history[len(v.history)-1].Version {
		return verdict{kind: verdictLater}
	}
	if at, ok := v.match(&s.SnapshotSummary); ok {
		v.pending = nil
		return v.verified(at, now)
	}
	if idle {
		return v.idle(now)
	}
	return verdict{kind: verdictLater}
}

// idle: nothing arrives; a pending summary the replica has reached is judged now.
func (v *verifier) idle(now time.Time) verdict {
	if v.pending == nil || v.history[len(v.history)-1].Version < v.pending.Watermark {
		return verdict{}
	}
	p := v.pending
	v.pending = nil
	return v.judge(p, now)
}

func (v *verifier) judge(s *ServedSummary, now time.Time) verdict {
	if at, ok := v.match(&s.SnapshotSummary); ok {
		return v.verified(at, now)
	}
	seen := false
	for _, r := range v.mismatchedReads {
		seen = seen || (r == s.ReadAt && s.ReadAt != "")
	}
	if !seen {
		v.mismatchedReads = append(v.mismatchedReads, s.ReadAt)
	}
	v.soon(s, now)
	state, ok := v.at(s.Watermark)
	if !ok {
		state = v.history[len(v.history)-1]
	}
	return verdict{kind: verdictMismatch, state: state, summary: s.SnapshotSummary, inARow: len(v.mismatchedReads)}
}

func (v *verifier) verified(version uint64, now time.Time) verdict {
	v.mismatchedReads = nil
	v.nextAt = now.Add(v.jittered())
	return verdict{kind: verdictVerified, version: version}
}

// soon: once the bridge reads the table again (a little after, so that pods asking at that moment
// share the read), but no later than the regular check.
func (v *verifier) soon(s *ServedSummary, now time.Time) {
	after := s.FreshFor + 100*time.Millisecond + time.Duration(float64(time.Second)*v.random())
	if j := v.jittered(); j < after {
		after = j
	}
	v.nextAt = now.Add(after)
}
