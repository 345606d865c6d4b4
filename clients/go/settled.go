package outbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// A reactor on a source's settled stream (the bridge's README, "The settled stream"): a durable
// JetStream consumer that hands each settled change to the application's handler, one at a time
// in stream order, and acks it once the handler has returned, as the TypeScript client's
// SettledReactor (clients/typescript/src/settled.ts) does. A settled message says "this entity
// changed, and has been quiet since": the handler reads the entity as it now stands.

// SettledChange is one settled change: the key's latest change, standing for Count changes from
// version From.
type SettledChange struct {
	Source, EntityType, EntityKey string
	Op                            string // "upsert" or "delete"
	Epoch, Version                uint64 // the latest change's, on the main stream
	From, Count                   uint64
	Through                       uint64 // every version at or below it is settled by this message or one before it
	Subject                       string
	Payload                       []byte // the latest change's payload (JSON; empty for a delete)
	Headers                       nats.Header
	Stream                        string
	StreamSeq                     uint64
	Redelivered                   uint64 // deliveries before this one (a crash after the handler, before its ack)
}

// SettledReactorOptions configure a SettledReactor.
type SettledReactorOptions struct {
	NATS          NatsOptions
	Conn          *nats.Conn // a connection the service owns, instead of NATS
	Stream        string     // the source's settled_stream (default <STREAM>_SETTLED)
	Durable       string     // one per reactor application; its instances share it
	FilterSubject string     // optional, e.g. control.account_settled.invoice.>
	// Returns nil: the change is acked. An error: tried again after a backoff, and no later change
	// is handed out meanwhile; with StopOnHandlerError, Run returns it and the change goes to the
	// next run.
	Handler            func(ctx context.Context, c *SettledChange) error
	StopOnHandlerError bool
	AckWait            time.Duration // nats-server hands a change out again after this (default 30 s)
	RetryMin, RetryMax time.Duration // the handler's backoff, doubling (default 500 ms to 30 s)
	Report             func(line string)
}

// SettledReactorStatus is what a health check reads.
type SettledReactorStatus struct {
	Handled, Failures, Unreadable uint64
	LastError                     string
}

// SettledReactor runs a handler on every settled change of a stream (NewSettledReactor).
type SettledReactor struct {
	opts   SettledReactorOptions
	mu     sync.Mutex
	status SettledReactorStatus
}

var durableName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// NewSettledReactor checks opts and fills in the defaults.
func NewSettledReactor(opts SettledReactorOptions) (*SettledReactor, error) {
	if opts.Stream == "" || opts.Handler == nil {
		return nil, errors.New("SettledReactor: Stream and Handler are required")
	}
	if !durableName.MatchString(opts.Durable) {
		return nil, errors.New("SettledReactor: Durable must be a name of letters, digits, '_' and '-'")
	}
	if opts.AckWait <= 0 {
		opts.AckWait = 30 * time.Second
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = 500 * time.Millisecond
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = 30 * time.Second
	}
	return &SettledReactor{opts: opts}, nil
}

// Status is a copy of the counts so far.
func (r *SettledReactor) Status() SettledReactorStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

func (r *SettledReactor) say(format string, a ...any) {
	if r.opts.Report != nil {
		r.opts.Report(fmt.Sprintf(format, a...))
	}
}

// SettledChangeOf reads m as a settled change of the bridge, or says why it is not one.
func SettledChangeOf(m *nats.Msg, stream string) (*SettledChange, error) {
	number := func(name string) (uint64, bool) {
		n, err := strconv.ParseUint(m.Header.Get(name), 10, 64)
		return n, err == nil
	}
	epoch, ok1 := number("Outbox-Epoch")
	version, ok2 := number("Outbox-Version")
	from, ok3 := number("Outbox-Settled-From")
	count, ok4 := number("Outbox-Settled-Count")
	through, ok5 := number("Outbox-Settled-Through")
	keys, ok6 := m.Header["Outbox-Entity-Key"]
	meta, err := m.Metadata()
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && len(keys) > 0) || err != nil {
		return nil, fmt.Errorf("a message of %s lacks a numeric Outbox-Epoch, Outbox-Version, Outbox-Settled-From, "+
			"-Count or -Through, or Outbox-Entity-Key: not a settled change of the bridge", stream)
	}
	op := "upsert"
	if m.Header.Get("Outbox-Op") == "delete" {
		op = "delete"
	}
	redelivered := uint64(0)
	if meta.NumDelivered > 1 {
		redelivered = meta.NumDelivered - 1
	}
	return &SettledChange{Source: m.Header.Get("Outbox-Source"), EntityType: m.Header.Get("Outbox-Entity-Type"),
		EntityKey: keys[0], Op: op, Epoch: epoch, Version: version, From: from, Count: count, Through: through,
		Subject: m.Subject, Payload: m.Data, Headers: m.Header, Stream: stream, StreamSeq: meta.Sequence.Stream,
		Redelivered: redelivered}, nil
}

// Run hands out changes until ctx ends (the change in hand, not acked, is handed out again to
// whoever runs next), or returns the handler's error under StopOnHandlerError. The durable
// consumer is created when missing: explicit acks, one change in flight, so a change handed out
// again comes before any later one. One that exists with another shape is refused.
func (r *SettledReactor) Run(ctx context.Context) error {
	nc := r.opts.Conn
	if nc == nil {
		opts, err := r.opts.NATS.options()
		if err != nil {
			return err
		}
		if nc, err = nats.Connect(r.opts.NATS.URL, opts...); err != nil {
			return fmt.Errorf("nats-server %s: %w", r.opts.NATS.URL, err)
		}
		defer nc.Close()
	}
	js, err := nc.JetStream()
	if err != nil {
		return err
	}
	if err := r.ensureConsumer(js); err != nil {
		return err
	}
	sub, err := js.PullSubscribe(r.opts.FilterSubject, r.opts.Durable, nats.Bind(r.opts.Stream, r.opts.Durable))
	if err != nil {
		return fmt.Errorf("consumer %s of stream %s: %w", r.opts.Durable, r.opts.Stream, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	for ctx.Err() == nil {
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		msgs, err := sub.Fetch(1, nats.Context(wait))
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			continue
		}
		if err != nil {
			r.say("[%s] fetch: %v; again in 1 s", r.opts.Stream, err)
			sleepCtx(ctx, time.Second)
			continue
		}
		for _, m := range msgs {
			if err := r.take(ctx, m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *SettledReactor) ensureConsumer(js nats.JetStreamContext) error {
	info, err := js.ConsumerInfo(r.opts.Stream, r.opts.Durable)
	if err == nil {
		c := info.Config
		var problems []string
		if c.AckPolicy != nats.AckExplicitPolicy {
			problems = append(problems, fmt.Sprintf("ack policy %v, not explicit", c.AckPolicy))
		}
		if c.MaxAckPending != 1 {
			problems = append(problems, fmt.Sprintf("max_ack_pending %d, not 1", c.MaxAckPending))
		}
		if c.FilterSubject != r.opts.FilterSubject {
			problems = append(problems, fmt.Sprintf("filter_subject '%s', not '%s'", c.FilterSubject, r.opts.FilterSubject))
		}
		if len(problems) > 0 {
			return fmt.Errorf("consumer %s of stream %s exists with %v: delete it or choose another durable name",
				r.opts.Durable, r.opts.Stream, problems)
		}
		return nil
	}
	if !errors.Is(err, nats.ErrConsumerNotFound) {
		return fmt.Errorf("consumer %s of stream %s: %w", r.opts.Durable, r.opts.Stream, err)
	}
	_, err = js.AddConsumer(r.opts.Stream, &nats.ConsumerConfig{Durable: r.opts.Durable, AckPolicy: nats.AckExplicitPolicy,
		DeliverPolicy: nats.DeliverAllPolicy, MaxAckPending: 1, AckWait: r.opts.AckWait, FilterSubject: r.opts.FilterSubject})
	if err != nil {
		return fmt.Errorf("creating consumer %s on stream %s: %w", r.opts.Durable, r.opts.Stream, err)
	}
	r.say("[%s] created consumer %s", r.opts.Stream, r.opts.Durable)
	return nil
}

// take hands m to the handler until it returns nil, then acks it (confirmed).
func (r *SettledReactor) take(ctx context.Context, m *nats.Msg) error {
	change, err := SettledChangeOf(m, r.opts.Stream)
	if err != nil {
		// Not the bridge's: no handler can make sense of it, and holding it would stop every later change.
		r.mu.Lock()
		r.status.Unreadable++
		r.mu.Unlock()
		r.say("[%s] %v; passed over (terminated: not handed out again)", r.opts.Stream, err)
		return m.Term()
	}
	working := time.NewTicker(r.opts.AckWait / 3)
	defer working.Stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-working.C:
				_ = m.InProgress()
			}
		}
	}()
	for backoff := r.opts.RetryMin; ; backoff = minDuration(r.opts.RetryMax, 2*backoff) {
		if ctx.Err() != nil {
			_ = m.Nak() // handed out again at once, to whoever runs next
			return nil
		}
		err := r.opts.Handler(ctx, change)
		if err == nil {
			break
		}
		r.mu.Lock()
		r.status.Failures++
		r.status.LastError = err.Error()
		r.mu.Unlock()
		if r.opts.StopOnHandlerError {
			_ = m.Nak()
			return fmt.Errorf("the handler failed on version %d (key %s): %w", change.Version, change.EntityKey, err)
		}
		r.say("[%s] the handler failed on version %d: %v; again in %v", r.opts.Stream, change.Version, err, backoff)
		sleepCtx(ctx, backoff)
	}
	// The handler's work is done: the ack, confirmed, before the next change. One not confirmed (a
	// lost connection) hands the change out again after AckWait, before any later one.
	if err := m.AckSync(); err != nil {
		r.say("[%s] the ack of sequence %d was not confirmed: %v; it may be handed out again", r.opts.Stream, change.StreamSeq, err)
	}
	r.mu.Lock()
	r.status.Handled++
	r.status.Failures = 0
	r.mu.Unlock()
	return nil
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
