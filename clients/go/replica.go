package outbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// The consumer (docs/consumers.md): bootstraps from the snapshot, streamed; follows the stream
// from stream.seq + 1 with an ordered consumer; bootstraps again on a version gap, a new epoch or
// a stream that can no longer give what comes next; keeps the checksum current and compares it
// with ?summary=true every few minutes (verify.go); hands each change to its store, which applies
// it with the inbox row in one step. What `outbox-bridge replica` does in C++
// (src/replica/replica.cpp), with the same lines.

// ReplicaOptions configure a Replica.
type ReplicaOptions struct {
	URL            string // the bridge's base URL, e.g. http://127.0.0.1:8080
	Source         string
	NATS           NatsOptions
	Store          Store         // default: a MemoryStore
	VerifyInterval time.Duration // between checks against ?summary=true, ±20% (default 5 min); negative: never
	VerifyHistory  int           // versions whose checksum is kept to compare a summary at (default 500)
	// Distinct reads of the table that differ, in a row, before a bootstrap (default 3): a summary
	// may reflect unpublished changes.
	MismatchesBeforeRebootstrap int
	Report                      func(line string)                          // one line per state change, "[source] ..."
	OnApplied                   func(ctx context.Context, c *Change) error // after the store applied it
	SnapshotBatch               int                                        // records handed to the store at a time (default 1000)
	HTTPClient                  *http.Client                               // default: http.Client{} (no Timeout)
	// A GET of the bridge that receives nothing for this long, its headers or the next bytes of its
	// body, is given up on (default 120 s, src/replica/replica.cpp's read timeout). Not its whole
	// length: a snapshot of millions of records takes as long as it takes.
	IdleTimeout time.Duration
}

// Counters count what a Replica did.
type Counters struct {
	Bootstraps, RejectedSnapshots, Gaps, EpochChanges uint64
	LostStreams                                       uint64 // the stream missing, or no longer holding what the row follows
	Applied, SkippedDuplicates, Verifications         uint64
	Mismatches                                        uint64
}

// Status is what a health check reads: where the replica is, how far behind the source it was
// at the last summary, and the last error.
type Status struct {
	Following           bool // a snapshot is installed and the stream followed
	Epoch               uint64
	AppliedVersion      uint64
	RecordCount         uint64
	LastVerifiedVersion uint64
	SourceWatermark     uint64 // of the last summary read (0 before one)
	Lag                 uint64 // SourceWatermark - AppliedVersion when positive
	LastError           error  // of the last step; nil when it succeeded
	LastErrorAt         time.Time
	Counters            Counters
}

// RetryableError is a failure Run retries with backoff.
type RetryableError struct{ Err error }

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

func retryable(format string, a ...any) error { return &RetryableError{fmt.Errorf(format, a...)} }

const stallPeriod = 30 * time.Second

// Replica keeps a replica of one source. Its methods other than Status are for one goroutine.
type Replica struct {
	opts     ReplicaOptions
	store    Store
	verifier *verifier
	http     *http.Client

	mu           sync.Mutex // guards row, counters, lastErr*, sourceAt, lastVerified for Status
	row          *InboxRow
	counters     Counters
	lastErr      error
	lastErrAt    time.Time
	sourceAt     uint64
	lastVerified uint64

	loaded          bool
	bootstrapNext   bool // decided beside an OnApplied error: the next step bootstraps
	awaiting        *awaiting
	lastWatch       time.Time
	lastProgress    time.Time
	reportedVersion uint64
	nc              *nats.Conn
	js              nats.JetStreamContext
	sub             *nats.Subscription
}

// awaiting: a snapshot named a stream that did not exist. It is followed again with backoff, and
// the source asked every stallPeriod whether it names another (a snapshot per retry reads the
// table each time).
type awaiting struct {
	stream string
	since  time.Time
}

// NewReplica is a Replica of opts.Source; Run starts it.
func NewReplica(opts ReplicaOptions) *Replica {
	if opts.Store == nil {
		opts.Store = NewMemoryStore()
	}
	interval := opts.VerifyInterval
	if interval == 0 {
		interval = 5 * time.Minute
	}
	if opts.VerifyHistory == 0 {
		opts.VerifyHistory = 500
	}
	if opts.MismatchesBeforeRebootstrap == 0 {
		opts.MismatchesBeforeRebootstrap = 3
	}
	if opts.SnapshotBatch == 0 {
		opts.SnapshotBatch = 1000
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 120 * time.Second
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	return &Replica{opts: opts, store: opts.Store, verifier: newVerifier(interval, opts.VerifyHistory), http: client}
}

// Store is the store the replica keeps its state in.
func (r *Replica) Store() Store { return r.store }

// Inbox is the inbox row (epoch, applied version, checksum); nil before the first bootstrap.
func (r *Replica) Inbox() *InboxRow {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.row == nil {
		return nil
	}
	row := *r.row
	return &row
}

// Status is the replica's state for a health check; safe from any goroutine.
func (r *Replica) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Status{Following: r.row != nil, LastVerifiedVersion: r.lastVerified, SourceWatermark: r.sourceAt,
		LastError: r.lastErr, LastErrorAt: r.lastErrAt, Counters: r.counters}
	if r.row != nil {
		s.Epoch, s.AppliedVersion, s.RecordCount = r.row.Epoch, r.row.AppliedVersion, r.row.RecordCount
	}
	if s.SourceWatermark > s.AppliedVersion {
		s.Lag = s.SourceWatermark - s.AppliedVersion
	}
	return s
}

func (r *Replica) setRow(row *InboxRow) {
	r.mu.Lock()
	r.row = row
	r.mu.Unlock()
}

func (r *Replica) count(f func(c *Counters)) {
	r.mu.Lock()
	f(&r.counters)
	r.mu.Unlock()
}

func (r *Replica) say(format string, a ...any) {
	if r.opts.Report != nil {
		r.opts.Report(fmt.Sprintf("[%s] ", r.opts.Source) + fmt.Sprintf(format, a...))
	}
}

// Run bootstraps (or resumes from the store's inbox row), then steps until ctx ends, retrying
// failures with backoff (200 ms doubling to 10 s); it returns ctx's error.
func (r *Replica) Run(ctx context.Context) error {
	delay := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := r.Step(ctx, 200*time.Millisecond)
		r.mu.Lock()
		r.lastErr = err
		if err != nil {
			r.lastErrAt = time.Now()
		}
		r.mu.Unlock()
		if err == nil {
			delay = 200 * time.Millisecond
			continue
		}
		if ctx.Err() != nil {
			break
		}
		r.say("%v; retrying in %d ms", err, delay.Milliseconds())
		r.unfollow()
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		if delay *= 2; delay > 10*time.Second {
			delay = 10 * time.Second
		}
	}
	return ctx.Err()
}

// Step applies what arrives within wait; bootstraps when needed; verifies when caught up.
func (r *Replica) Step(ctx context.Context, wait time.Duration) error {
	if !r.loaded {
		row, err := r.store.Load(ctx, r.opts.Source)
		if err != nil {
			return err
		}
		r.setRow(row)
		r.loaded = true
		if row != nil {
			r.mu.Lock()
			r.lastVerified = 0 // not by this process: its history starts here
			r.mu.Unlock()
			r.verifier.reset(stateOf(row), time.Now())
			r.say("resumed from the inbox: epoch %d, version %d, %d records, checksum %s", row.Epoch,
				row.AppliedVersion, row.RecordCount, FormatChecksum(row.Sum))
		}
	}
	if r.row == nil || r.bootstrapNext {
		return r.Bootstrap(ctx)
	}
	if r.sub == nil {
		problem, err := r.follow(r.row.StreamName, r.row.StreamSeq+1)
		if err != nil {
			return err
		}
		if problem != nil {
			return r.streamLost(ctx, problem)
		}
	}
	m, err := r.sub.NextMsg(wait)
	if err != nil && !errors.Is(err, nats.ErrTimeout) {
		r.unfollow()
		return retryable("following the stream: %v", err)
	}
	needBootstrap := false
	now := time.Now()
	if m != nil {
		if needBootstrap, err = r.applyMessage(ctx, m); err != nil {
			return err
		}
		if row := r.row; !needBootstrap && row != nil && row.AppliedVersion != r.reportedVersion &&
			now.Sub(r.lastProgress) >= time.Second {
			r.say("applied through version %d (%d records)", row.AppliedVersion, row.RecordCount)
			r.reportedVersion = row.AppliedVersion
			r.lastProgress = now
		}
	} else {
		// Caught up: a summary the replica has now reached is judged, and the stream asked now and
		// then whether it can still give what comes next (a purge on a quiet source shows no gap).
		needBootstrap = r.judged(r.verifier.idle(now))
		if !needBootstrap {
			if needBootstrap, err = r.watch(now); err != nil {
				return err
			}
		}
	}
	if !needBootstrap && r.loaded && r.row != nil && r.verifier.due(now) {
		if needBootstrap, err = r.verify(ctx, m == nil); err != nil {
			return err
		}
	}
	if needBootstrap {
		return r.Bootstrap(ctx)
	}
	return nil
}

func stateOf(row *InboxRow) VersionState {
	return VersionState{row.AppliedVersion, row.Sum, row.RecordCount}
}

// headerNumber is the header's leading decimal digits as a number, as strtoull reads them: 0 when
// it is missing or starts with no digit, the largest uint64 past it.
func headerNumber(m *nats.Msg, name string) uint64 {
	s := strings.TrimLeft(m.Header.Get(name), " \t\n\v\f\r")
	s = strings.TrimPrefix(s, "+")
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0
	}
	n, err := strconv.ParseUint(s[:end], 10, 64)
	if err != nil {
		return math.MaxUint64
	}
	return n
}
