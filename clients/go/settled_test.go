package outbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The settled stream's reactor against the real nats-server: settled messages as the bridge
// writes them are handed to the handler in stream order, one at a time, acked once it returns; a
// handler that fails gets the same change again before any later one; a reactor stopped with a
// change in hand, or a second instance, resumes where the durable consumer stands.

// stackNatsURL is the stack's nats-server (tools/test starts it): missing, the test fails.
func stackNatsURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("OUTBOX_TEST_NATS_URL")
	if url == "" {
		t.Fatal("OUTBOX_TEST_NATS_URL is not set: run under tools/test (the stack's nats-server)")
	}
	return url
}

type settledFixture struct {
	t       *testing.T
	nc      *nats.Conn
	js      nats.JetStreamContext
	stream  string
	subject string
}

func newSettledFixture(t *testing.T) *settledFixture {
	natsURL := stackNatsURL(t)
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	id := time.Now().UnixNano()
	f := &settledFixture{t: t, nc: nc, js: js, stream: fmt.Sprintf("GO_%d_SETTLED", id), subject: fmt.Sprintf("go%d.account_settled", id)}
	if _, err := js.AddStream(&nats.StreamConfig{Name: f.stream, Subjects: []string{f.subject + ".>"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = js.DeleteStream(f.stream)
		nc.Close()
	})
	return f
}

func (f *settledFixture) publish(key string, version, from uint64) {
	m := nats.NewMsg(fmt.Sprintf("%s.account.%s.upsert", f.subject, key))
	for name, value := range map[string]string{"Outbox-Source": "account", "Outbox-Epoch": "1",
		"Outbox-Version": fmt.Sprint(version), "Outbox-Entity-Type": "account", "Outbox-Entity-Key": key,
		"Outbox-Op": "upsert", "Outbox-Settled-From": fmt.Sprint(from), "Outbox-Settled-Count": fmt.Sprint(version - from + 1),
		"Outbox-Settled-Through": fmt.Sprint(from - 1), "Outbox-Settled-Seen": fmt.Sprint(version)} {
		m.Header.Set(name, value)
	}
	m.Data = []byte(fmt.Sprintf(`{"id":"%s","v":%d}`, key, version))
	if _, err := f.js.PublishMsg(m, nats.MsgId(fmt.Sprintf("account:settled:%d", version))); err != nil {
		f.t.Fatal(err)
	}
}

// run starts a reactor of durable and returns what its handler saw and a stop that waits for Run.
func (f *settledFixture) run(opts SettledReactorOptions) (*SettledReactor, func() error) {
	opts.Conn, opts.Stream = f.nc, f.stream
	r, err := NewSettledReactor(opts)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return r, func() error { cancel(); return <-done }
}

type seenChanges struct {
	mu      sync.Mutex
	changes []SettledChange
}

func (s *seenChanges) handler(_ context.Context, c *SettledChange) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, *c)
	return nil
}

func (s *seenChanges) versions() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint64
	for _, c := range s.changes {
		out = append(out, c.Version)
	}
	return out
}

func TestSettledReactorHandsEachChangeOnceInOrderAndANewInstanceResumes(t *testing.T) {
	f := newSettledFixture(t)
	for i := uint64(1); i <= 5; i++ {
		f.publish(fmt.Sprintf("k%d", i), 3*i, 3*i-2)
	}
	var seen seenChanges
	r, stop := f.run(SettledReactorOptions{Durable: "series", Handler: seen.handler})
	waitFor(t, 10*time.Second, "five changes", func() bool { return len(seen.versions()) == 5 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for i, c := range seen.changes {
		n := uint64(i + 1)
		if c.EntityKey != fmt.Sprintf("k%d", n) || c.Version != 3*n || c.From != 3*n-2 || c.Count != 3 || c.Through != 3*n-3 ||
			c.Op != "upsert" || c.EntityType != "account" || c.Redelivered != 0 {
			t.Fatalf("change %d: %+v", i, c)
		}
	}
	if string(seen.changes[0].Payload) != `{"id":"k1","v":3}` || seen.changes[4].Headers.Get("Outbox-Settled-Seen") != "15" {
		t.Fatalf("payload %s, headers %v", seen.changes[0].Payload, seen.changes[4].Headers)
	}
	if st := r.Status(); st.Handled != 5 {
		t.Fatalf("status %+v", st)
	}
	f.publish("k1", 20, 16)
	var later seenChanges
	_, stop = f.run(SettledReactorOptions{Durable: "series", Handler: later.handler})
	waitFor(t, 10*time.Second, "the sixth change", func() bool { return len(later.versions()) == 1 })
	time.Sleep(300 * time.Millisecond) // nothing else comes
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if v := later.versions(); len(v) != 1 || v[0] != 20 {
		t.Fatalf("the second instance saw %v", v)
	}
}

func TestSettledReactorRetriesAFailingHandlerInOrder(t *testing.T) {
	f := newSettledFixture(t)
	f.publish("a", 1, 1)
	f.publish("b", 2, 2)
	var mu sync.Mutex
	var calls []uint64
	r, stop := f.run(SettledReactorOptions{Durable: "flaky", RetryMin: 20 * time.Millisecond,
		Handler: func(_ context.Context, c *SettledChange) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, c.Version)
			if c.Version == 1 && len(calls) <= 3 {
				return errors.New("the series store is down")
			}
			return nil
		}})
	waitFor(t, 10*time.Second, "version 2", func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) == 5 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(calls) != "[1 1 1 1 2]" {
		t.Fatalf("calls %v", calls)
	}
	if st := r.Status(); st.Handled != 2 || st.Failures != 0 || st.LastError != "the series store is down" {
		t.Fatalf("status %+v", st)
	}
}

func TestSettledReactorStopOnHandlerErrorHandsTheChangeToTheNextRun(t *testing.T) {
	f := newSettledFixture(t)
	f.publish("a", 1, 1)
	failing, err := NewSettledReactor(SettledReactorOptions{Conn: f.nc, Stream: f.stream, Durable: "strict",
		StopOnHandlerError: true, Handler: func(context.Context, *SettledChange) error { return errors.New("bad day") }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = failing.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "bad day") {
		t.Fatalf("run returned %v", err)
	}
	var next seenChanges
	_, stop := f.run(SettledReactorOptions{Durable: "strict", Handler: next.handler})
	waitFor(t, 10*time.Second, "the change again", func() bool { return len(next.versions()) == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c := next.changes[0]; c.Version != 1 || c.Redelivered < 1 {
		t.Fatalf("%+v", c)
	}
}

func TestSettledReactorPassesOverForeignMessagesAndRefusesAnotherShape(t *testing.T) {
	f := newSettledFixture(t)
	if _, err := f.js.Publish(f.subject+".account.x.upsert", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	f.publish("a", 1, 1)
	var seen seenChanges
	r, stop := f.run(SettledReactorOptions{Durable: "mixed", Handler: seen.handler})
	waitFor(t, 10*time.Second, "the bridge's change", func() bool { return len(seen.versions()) == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st := r.Status(); st.Unreadable != 1 || st.Handled != 1 {
		t.Fatalf("status %+v", st)
	}
	other, err := NewSettledReactor(SettledReactorOptions{Conn: f.nc, Stream: f.stream, Durable: "mixed",
		FilterSubject: f.subject + ".account.>", Handler: seen.handler})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "filter_subject") {
		t.Fatalf("a consumer of another shape: %v", err)
	}
}
