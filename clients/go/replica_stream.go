package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// The replica and its stream: connecting, following from the sequence after the last one taken,
// and the check that the stream can still give it (docs/consumers.md section 3, "The stream
// itself"), as src/replica/replica_stream.cpp makes it.

// streamProblem says why a stream cannot give what a replica needs next; missing: it does not
// exist.
type streamProblem struct {
	missing bool
	why     string
}

func (r *Replica) connect() error {
	if r.nc != nil && !r.nc.IsClosed() {
		return nil
	}
	opts, err := r.opts.NATS.options()
	if err != nil {
		return err
	}
	nc, err := nats.Connect(r.opts.NATS.URL, opts...)
	if err != nil {
		return retryable("nats: %v", err)
	}
	var jsOpts []nats.JSOpt
	if r.opts.NATS.JSDomain != "" {
		jsOpts = append(jsOpts, nats.Domain(r.opts.NATS.JSDomain))
	}
	js, err := nc.JetStream(jsOpts...)
	if err != nil {
		nc.Close()
		return retryable("nats: %v", err)
	}
	r.nc, r.js = nc, js
	return nil
}

// problemOf: whether stream, as info (nil: missing), can give sequence fromSeq and what follows,
// which a replica that took everything through fromSeq - 1 expects. It cannot when it is missing
// (deleted, or the source's stream renamed), when it begins after fromSeq (purged or expired: the
// messages from fromSeq on are gone, whether or not later ones come), or when it ends before
// fromSeq - 1 (recreated, or its tail lost: the sequences the replica followed are not this
// stream's).
func problemOf(info *nats.StreamInfo, stream string, fromSeq uint64) *streamProblem {
	if info == nil {
		return &streamProblem{true, fmt.Sprintf("stream %s does not exist (deleted, or renamed)", stream)}
	}
	if info.State.FirstSeq > fromSeq {
		return &streamProblem{false, fmt.Sprintf("stream %s begins at sequence %d: sequence %d was purged or expired",
			stream, info.State.FirstSeq, fromSeq)}
	}
	if info.State.LastSeq+1 < fromSeq {
		return &streamProblem{false, fmt.Sprintf("stream %s ends at sequence %d, before sequence %d that the replica "+
			"followed: it was recreated", stream, info.State.LastSeq, fromSeq-1)}
	}
	return nil
}

func (r *Replica) streamInfo(stream string) (*nats.StreamInfo, error) {
	if err := r.connect(); err != nil {
		return nil, err
	}
	info, err := r.js.StreamInfo(stream)
	if errors.Is(err, nats.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, retryable("stream %s: %v", stream, err)
	}
	return info, nil
}

func (r *Replica) problem(stream string, fromSeq uint64) (*streamProblem, error) {
	info, err := r.streamInfo(stream)
	if err != nil {
		return nil, err
	}
	return problemOf(info, stream, fromSeq), nil
}

// follow: stream from fromSeq with an ordered consumer, or why that stream cannot give it.
func (r *Replica) follow(stream string, fromSeq uint64) (*streamProblem, error) {
	r.unfollow()
	info, err := r.streamInfo(stream)
	if err != nil {
		return nil, err
	}
	if p := problemOf(info, stream, fromSeq); p != nil {
		return p, nil
	}
	if len(info.Config.Subjects) == 0 {
		return nil, retryable("stream %s has no subjects", stream)
	}
	sub, err := r.js.SubscribeSync(info.Config.Subjects[0], nats.OrderedConsumer(), nats.BindStream(stream),
		nats.StartSequence(fromSeq))
	if errors.Is(err, nats.ErrStreamNotFound) {
		return &streamProblem{true, fmt.Sprintf("stream %s does not exist (deleted, or renamed)", stream)}, nil
	}
	if err != nil {
		return nil, retryable("following stream %s: %v", stream, err)
	}
	r.sub = sub
	r.awaiting = nil
	return nil, nil
}

// streamLost: the row's stream cannot give what comes next, a reason to bootstrap, as a gap is.
// When the snapshot itself named that stream and it is missing, the bridge creates it at its next
// publish: wait for it, and ask the source every stallPeriod whether it names another.
func (r *Replica) streamLost(ctx context.Context, p *streamProblem) error {
	why := p.why
	if p.missing && r.awaiting != nil && r.awaiting.stream == r.row.StreamName {
		if time.Since(r.awaiting.since) < stallPeriod {
			return retryable("%s: waiting for the bridge to create it", why)
		}
		summary, err := r.fetchSummary(ctx)
		if err != nil {
			return err
		}
		if summary.StreamName == r.row.StreamName && summary.Epoch <= r.row.Epoch {
			r.awaiting.since = time.Now()
			return retryable("%s, and the source still names it: waiting for the bridge to create it", why)
		}
		if summary.StreamName != r.row.StreamName {
			why += "; the source now publishes to stream " + summary.StreamName
		}
	}
	r.count(func(c *Counters) { c.LostStreams++ })
	r.say("%s: re-bootstrapping", why)
	return r.Bootstrap(ctx)
}

// watch: every stallPeriod while nothing arrives, whether the stream can still give what comes
// next (nats-server alone: no summary, no read of the source). True when a bootstrap is needed.
func (r *Replica) watch(now time.Time) (bool, error) {
	if now.Sub(r.lastWatch) < stallPeriod {
		return false, nil
	}
	r.lastWatch = now
	p, err := r.problem(r.row.StreamName, r.row.StreamSeq+1)
	if err != nil || p == nil {
		return false, err
	}
	r.count(func(c *Counters) { c.LostStreams++ })
	r.say("%s: re-bootstrapping", p.why)
	return true, nil
}

func (r *Replica) unfollow() {
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
		r.sub = nil
	}
}

// Close stops following and closes the connection to nats-server.
func (r *Replica) Close() {
	r.unfollow()
	if r.nc != nil {
		r.nc.Close()
		r.nc, r.js = nil, nil
	}
}
