package outbox

import (
	"context"
	"fmt"
	"testing"

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
