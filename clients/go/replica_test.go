package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Replica end to end: rows appended by the Producer inside transactions, published by the
// stack's bridge (OUTBOX_TEST_BRIDGE_BIN) through its nats-server, followed, verified, decoded,
// and its Status and context as an application uses them.

type bridgeSource struct {
	db     *sql.DB
	name   string
	port   int
	bridge *exec.Cmd
	log    string
}

func startBridgeSource(t *testing.T) *bridgeSource {
	t.Helper()
	db := testDB(t)
	var database string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&database); err != nil {
		t.Fatal(err)
	}
	s := &bridgeSource{db: db, name: "go" + strings.TrimPrefix(database, "go_client_")[:8]}
	mustExec(t, db, "CREATE TABLE accounts (id BIGINT UNSIGNED PRIMARY KEY, display_name VARCHAR(191) NULL) "+
		"DEFAULT CHARSET=utf8mb4")
	dir := os.Getenv("OUTBOX_TEST_TMP")
	if dir == "" {
		dir = t.TempDir()
	}
	config := filepath.Join(dir, "config-"+s.name+".toml")
	toml := fmt.Sprintf("[nats]\nurl = %q\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n[[source]]\nname = %q\n"+
		"dsn = \"mysql://%s@%s:%s/%s\"\npassword = %q\npoll_interval = \"20ms\"\n"+
		"snapshot_query = \"SELECT id, display_name AS displayName FROM accounts\"\nsnapshot_key = \"id\"\n"+
		"summary_interval = \"0\"\n", os.Getenv("OUTBOX_TEST_NATS_URL"), s.name, os.Getenv("OUTBOX_TEST_MYSQL_USER"),
		os.Getenv("OUTBOX_TEST_MYSQL_HOST"), os.Getenv("OUTBOX_TEST_MYSQL_PORT"), database,
		os.Getenv("OUTBOX_TEST_MYSQL_PASSWORD"))
	if err := os.WriteFile(config, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv("OUTBOX_TEST_BRIDGE_BIN")
	if bin == "" {
		t.Fatal("OUTBOX_TEST_BRIDGE_BIN is not set: run under tools/test")
	}
	if out, err := exec.Command(bin, "migrate", "--config", config).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	s.log = filepath.Join(dir, "bridge-"+s.name+".log")
	logFile, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	s.bridge = exec.Command(bin, "run", "--config", config)
	s.bridge.Stdout, s.bridge.Stderr = logFile, logFile
	if err := s.bridge.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.bridge.Process.Kill()
		_ = s.bridge.Wait()
		logFile.Close()
	})
	listening := regexp.MustCompile(`http: listening on http://[0-9.]+:([0-9]+)`)
	waitFor(t, 20*time.Second, "the bridge's HTTP port", func() bool {
		data, _ := os.ReadFile(s.log)
		if m := listening.FindSubmatch(data); m != nil {
			_, _ = fmt.Sscan(string(m[1]), &s.port)
		}
		return s.port != 0
	})
	return s
}

func waitFor(t *testing.T, limit time.Duration, what string, done func() bool) {
	t.Helper()
	for end := time.Now().Add(limit); !done(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %s within %v", what, limit)
		}
	}
}

type lines struct {
	mu   sync.Mutex
	text []string
}

func (l *lines) add(line string) { l.mu.Lock(); l.text = append(l.text, line); l.mu.Unlock() }
func (l *lines) has(part string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.text {
		if strings.Contains(s, part) {
			return true
		}
	}
	return false
}

type account struct {
	ID          uint64  `outbox:"id"`
	DisplayName *string `outbox:"displayName"`
}

func TestReplicaFollowsWhatTheProducerWrote(t *testing.T) {
	s := startBridgeSource(t)
	p, err := NewProducer(Producer{Table: s.name + "_control_outbox", EntityType: "account", From: "accounts",
		Key: "id", Payload: "JSON_OBJECT('id', id, 'displayName', display_name)"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	write := func(id int, name string, traceparent string) {
		tx := begin(t, s.db)
		change := RowChange{Where: "id = ?", Params: []any{id}}
		if traceparent != "" {
			change.Headers = map[string]string{"traceparent": traceparent}
		}
		if name == "" {
			_, err = p.Delete(ctx, tx, change)
			mustExec(t, tx, "DELETE FROM accounts WHERE id = ?", id)
		} else {
			mustExec(t, tx, "INSERT INTO accounts VALUES (?, ?) ON DUPLICATE KEY UPDATE display_name = ?", id, name, name)
			_, err = p.Upsert(ctx, tx, change)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 10; i++ {
		write(i, fmt.Sprintf("Account %d", i), "")
	}
	var seen lines
	var applied sync.Map // version -> traceparent
	store := NewMemoryStore()
	r := NewReplica(ReplicaOptions{URL: fmt.Sprintf("http://127.0.0.1:%d", s.port), Source: s.name,
		NATS: NatsOptions{URL: os.Getenv("OUTBOX_TEST_NATS_URL")}, Store: store, VerifyInterval: 100 * time.Millisecond,
		Report: seen.add, OnApplied: func(_ context.Context, c *Change) error {
			applied.Store(c.Version, strings.Join(c.Headers["traceparent"], ","))
			return nil
		}})
	defer r.Close()
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(runCtx) }()
	waitFor(t, 30*time.Second, "verification at version 10", func() bool { return seen.has("] verified at version 10:") })
	trace := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	write(3, "Renamed", trace)
	write(4, "", "")
	write(11, "New", "")
	waitFor(t, 30*time.Second, "verification at version 13", func() bool { return seen.has("] verified at version 13:") })
	if got, _ := applied.Load(uint64(11)); got != trace {
		t.Errorf("version 11's traceparent: %q", got)
	}
	st := r.Status()
	if !st.Following || st.AppliedVersion != 13 || st.RecordCount != 10 || st.Lag != 0 || st.LastVerifiedVersion != 13 ||
		st.Counters.Bootstraps != 1 || st.Counters.Applied < 3 {
		t.Errorf("status %+v", st)
	}
	records := store.Records(s.name)
	names := map[uint64]string{}
	for _, values := range records {
		var a account
		if err := Decode(r.Inbox().Columns, values, &a); err != nil {
			t.Fatal(err)
		}
		names[a.ID] = *a.DisplayName
	}
	if len(names) != 10 || names[3] != "Renamed" || names[11] != "New" || names[5] != "Account 5" {
		t.Errorf("records %v", names)
	}
	if _, ok := names[4]; ok {
		t.Errorf("account 4 was deleted: %v", names)
	}
	cancel()
	select {
	case err := <-ran:
		if err != context.Canceled {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// A bridge that accepts and never answers: the context ends the bootstrap's GET.
func TestContextEndsABootstrapThatWaits(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	r := NewReplica(ReplicaOptions{URL: "http://" + silent.Addr().String(), Source: "quiet",
		NATS: NatsOptions{URL: os.Getenv("OUTBOX_TEST_NATS_URL")}})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	began := time.Now()
	err = r.Bootstrap(ctx)
	if err == nil || time.Since(began) > 5*time.Second {
		t.Fatalf("Bootstrap returned %v after %v", err, time.Since(began))
	}
	if st := r.Status(); st.Following {
		t.Fatalf("following after a bootstrap that never read a snapshot: %+v", st)
	}
}
