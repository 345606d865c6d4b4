package outbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The rules for each message (docs/consumers.md section 3) on messages made here: what the stream
// of a bridge never carries, and what expiry leaves behind, as src/replica/replica.cpp treats them.

// streamMsg is a message of stream S at sequence seq, as an ordered consumer delivers it.
func streamMsg(seq uint64, headers map[string]string) *nats.Msg {
	m := nats.NewMsg("control.account.x")
	m.Sub = &nats.Subscription{}
	m.Reply = fmt.Sprintf("$JS.ACK.S.C.1.%d.%d.0.0", seq, seq)
	for k, v := range headers {
		m.Header.Set(k, v)
	}
	m.Data = []byte(`{"id":1}`)
	return m
}

func replicaAt(epoch, applied, streamSeq uint64) *Replica {
	r := NewReplica(ReplicaOptions{Source: "account", VerifyInterval: -1})
	r.setRow(&InboxRow{Epoch: epoch, AppliedVersion: applied, StreamName: "S", StreamSeq: streamSeq,
		Columns: []string{"id"}, Numeric: []bool{true}})
	return r
}

// A message whose Outbox-Epoch or Outbox-Version is missing or no number is of epoch 0 (or
// version 0): older than what the replica holds, skipped — not an error retried for ever.
func TestMessageWithoutNumbersIsSkipped(t *testing.T) {
	for i, h := range []map[string]string{
		{"Outbox-Version": "11"},
		{"Outbox-Epoch": "two", "Outbox-Version": "11"},
		{"Outbox-Epoch": "2"},
		{"Outbox-Epoch": "2", "Outbox-Version": "v11"},
	} {
		r := replicaAt(2, 10, 20)
		seq := uint64(21 + i)
		need, err := r.applyMessage(context.Background(), streamMsg(seq, h))
		if err != nil || need {
			t.Fatalf("%v: bootstrap %v, error %v", h, need, err)
		}
		if got := r.Status().Counters.SkippedDuplicates; got != 1 {
			t.Fatalf("%v: %d skipped", h, got)
		}
		if row := r.Inbox(); row.AppliedVersion != 10 {
			t.Fatalf("%v: version %d", h, row.AppliedVersion)
		}
	}
}

// A skipped message moves the stream sequence the replica follows from: once max_age expired it,
// the stream still holds what comes next, and the replica does not bootstrap for nothing.
func TestSkippedMessageMovesTheStreamSequence(t *testing.T) {
	r := replicaAt(2, 10, 20)
	for i, h := range []map[string]string{
		{"Outbox-Epoch": "2", "Outbox-Version": "9"},  // applied already
		{"Outbox-Epoch": "1", "Outbox-Version": "12"}, // an older epoch
	} {
		seq := uint64(21 + i)
		if need, err := r.applyMessage(context.Background(), streamMsg(seq, h)); err != nil || need {
			t.Fatalf("sequence %d: bootstrap %v, error %v", seq, need, err)
		}
		if row := r.Inbox(); row.StreamSeq != seq || row.AppliedVersion != 10 {
			t.Fatalf("sequence %d: stream sequence %d, version %d", seq, row.StreamSeq, row.AppliedVersion)
		}
	}
	// The versions that follow still apply (the store's row is not moved by a skip).
	r.store.(*MemoryStore).sources["account"] = &memorySource{*r.Inbox(), map[string][]Value{}}
	need, err := r.applyMessage(context.Background(), streamMsg(23, map[string]string{"Outbox-Epoch": "2",
		"Outbox-Version": "11", "Outbox-Entity-Key": "1"}))
	if err != nil || need {
		t.Fatalf("version 11: bootstrap %v, error %v", need, err)
	}
	if row := r.Inbox(); row.AppliedVersion != 11 || row.StreamSeq != 23 {
		t.Fatalf("version 11: version %d, stream sequence %d", row.AppliedVersion, row.StreamSeq)
	}
}

// An OnApplied that fails: the change stays applied, and a re-bootstrap the verifier decided on
// that same change is not lost with the error — the next step bootstraps (a GET of the snapshot).
func TestOnAppliedErrorKeepsTheVerifiersBootstrap(t *testing.T) {
	natsURL := stackNatsURL(t)
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	stream := fmt.Sprintf("GO_ONAPPLIED_%d", time.Now().UnixNano())
	if _, err := js.AddStream(&nats.StreamConfig{Name: stream, Subjects: []string{strings.ToLower(stream) + ".>"}}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = js.DeleteStream(stream) }()
	for i := 0; i < 2; i++ { // sequence 2 is the change applied below
		if _, err := js.Publish(strings.ToLower(stream)+".x", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	var gets atomic.Int32
	bridge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Query().Get("summary") == "" {
			gets.Add(1)
		}
		http.Error(w, "not now", http.StatusServiceUnavailable)
	}))
	defer bridge.Close()
	failed := errors.New("the application's own failure")
	r := NewReplica(ReplicaOptions{URL: bridge.URL, Source: "account", NATS: NatsOptions{URL: natsURL},
		VerifyInterval: -1, VerifyHistory: 1,
		OnApplied: func(context.Context, *Change) error { return failed }})
	defer r.Close()
	row := InboxRow{Epoch: 2, AppliedVersion: 10, StreamName: stream, StreamSeq: 1, Columns: []string{"id"},
		Numeric: []bool{true}, Generation: 1}
	r.setRow(&row)
	r.loaded = true
	r.store.(*MemoryStore).sources["account"] = &memorySource{row, map[string][]Value{}}
	// Two distinct reads of the table differed already; the third is pending at version 11.
	r.verifier.reset(stateOf(&row), time.Now())
	r.verifier.mismatchedReads = []string{"1", "2"}
	r.verifier.pending = served(11, 999, 7, "3")
	need, err := r.applyMessage(context.Background(), streamMsg(2, map[string]string{"Outbox-Epoch": "2",
		"Outbox-Version": "11", "Outbox-Entity-Key": "1"}))
	if !errors.Is(err, failed) || r.Inbox().AppliedVersion != 11 {
		t.Fatalf("bootstrap %v, error %v, version %d", need, err, r.Inbox().AppliedVersion)
	}
	_ = r.Step(context.Background(), 50*time.Millisecond)
	if gets.Load() != 1 {
		t.Fatalf("%d GETs of the snapshot after the verifier's third mismatch", gets.Load())
	}
}
