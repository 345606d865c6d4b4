package outbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The snapshot's GET is bounded by the time nothing arrives, not by its length (as the C++
// consumer's read timeout and the TypeScript one's): a snapshot of millions of records takes as
// long as it takes; a bridge that stops sending is given up on.

// slowBridge serves doc in pieces, pause apart; stallAt: after that many bytes (or before the
// headers, at 0), it sends nothing more until the client goes.
func slowBridge(t *testing.T, doc string, pieces int, pause time.Duration, stallAt int) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		wait := func(d time.Duration) bool {
			select {
			case <-req.Context().Done():
				return false
			case <-time.After(d):
				return true
			}
		}
		if stallAt == 0 {
			wait(time.Minute)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		size := (len(doc) + pieces - 1) / pieces
		for sent := 0; sent < len(doc); sent += size {
			if stallAt > 0 && sent >= stallAt {
				wait(time.Minute)
				return
			}
			end := sent + size
			if end > len(doc) {
				end = len(doc)
			}
			_, _ = w.Write([]byte(doc[sent:end]))
			w.(http.Flusher).Flush()
			if !wait(pause) {
				return
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func bootstrapFrom(t *testing.T, url string, idle time.Duration) (*Replica, error, time.Duration) {
	natsURL := stackNatsURL(t)
	r := NewReplica(ReplicaOptions{URL: url, Source: "account", NATS: NatsOptions{URL: natsURL},
		VerifyInterval: -1, IdleTimeout: idle})
	t.Cleanup(r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	err := r.Bootstrap(ctx)
	return r, err, time.Since(start)
}

func TestSlowSnapshotLongerThanTheIdleTimeoutLoads(t *testing.T) {
	doc := testDoc()
	// Pieces 250 ms apart against an idle timeout of a second: room for a process that stalls
	// (the server and the client share it) without the download looking idle.
	r, err, took := bootstrapFrom(t, slowBridge(t, doc, 12, 250*time.Millisecond, -1).URL, time.Second)
	// The snapshot's stream may not exist on this nats-server: the bootstrap is done before that.
	if got := r.Status().Counters.Bootstraps; got != 1 {
		t.Fatalf("%d bootstraps after %v: %v", got, took, err)
	}
	if took < 2*time.Second {
		t.Fatalf("the snapshot came in %v: not slower than the idle timeout", took)
	}
	if row := r.Inbox(); row == nil || row.RecordCount != 3 || row.AppliedVersion != 1234 {
		t.Fatalf("inbox %+v", row)
	}
}

func TestSnapshotThatStallsIsGivenUp(t *testing.T) {
	doc := testDoc()
	for _, stallAt := range []int{0, len(doc) / 2} {
		r, err, took := bootstrapFrom(t, slowBridge(t, doc, 12, 10*time.Millisecond, stallAt).URL, 400*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "nothing arrived for 400ms") {
			t.Fatalf("stalled after %d bytes: %v", stallAt, err)
		}
		if took > 5*time.Second || r.Status().Counters.Bootstraps != 0 {
			t.Fatalf("stalled after %d bytes: given up after %v, %d bootstraps", stallAt, took,
				r.Status().Counters.Bootstraps)
		}
	}
}
