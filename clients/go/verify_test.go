package outbox

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"testing"
	"time"
)

func served(watermark, sum, count uint64, readAt string) *ServedSummary {
	s := &ServedSummary{ReadAt: readAt, FreshFor: time.Second}
	s.Watermark, s.Sum, s.RecordCount = watermark, sum, count
	s.Checksum = FormatChecksum(sum)
	return s
}

func TestVerifierComparesAtTheSummarysWatermark(t *testing.T) {
	v := newVerifier(time.Minute, 500)
	now := time.Now()
	v.reset(VersionState{10, 100, 5}, now)
	for i := uint64(11); i <= 20; i++ {
		v.applied(VersionState{i, 100 + i, 5}, now)
	}
	// A summary read at version 15, offered at 20: verified at 15.
	if got := v.offer(served(15, 115, 5, "1"), now, true); got.kind != verdictVerified || got.version != 15 {
		t.Fatalf("%+v", got)
	}
	// Ahead of the replica: later, then verified when the replica gets there.
	if got := v.offer(served(22, 122, 5, "2"), now, false); got.kind != verdictLater {
		t.Fatalf("%+v", got)
	}
	v.applied(VersionState{21, 121, 5}, now)
	if got := v.applied(VersionState{22, 122, 5}, now); got.kind != verdictVerified || got.version != 22 {
		t.Fatalf("%+v", got)
	}
	// Older than the history kept: skipped, asked again after Outbox-Summary-Fresh-For.
	if got := v.offer(served(3, 0, 0, "3"), now, true); got.kind != verdictLater {
		t.Fatalf("%+v", got)
	}
	if !v.due(now.Add(2200 * time.Millisecond)) {
		t.Fatal("not asked again once the bridge reads again")
	}
}

// A summary that reflects a change committed but not yet published matches a later version.
func TestVerifierMatchesALaterVersion(t *testing.T) {
	v := newVerifier(time.Minute, 500)
	now := time.Now()
	v.reset(VersionState{10, 100, 5}, now)
	v.applied(VersionState{11, 111, 6}, now)
	if got := v.offer(served(10, 111, 6, "1"), now, true); got.kind != verdictVerified || got.version != 11 {
		t.Fatalf("%+v", got)
	}
}

// Only a difference over three distinct reads in a row means the replica is wrong; the same read
// served twice counts once.
func TestVerifierMismatchMustPersistOverDistinctReads(t *testing.T) {
	v := newVerifier(time.Minute, 500)
	now := time.Now()
	v.reset(VersionState{10, 100, 5}, now)
	for i, c := range []struct {
		readAt string
		inARow int
	}{{"1", 1}, {"1", 1}, {"2", 2}, {"3", 3}} {
		got := v.offer(served(10, 999, 5, c.readAt), now, true)
		if got.kind != verdictMismatch || got.inARow != c.inARow || got.state.Version != 10 {
			t.Fatalf("read %d: %+v", i, got)
		}
	}
	// A match clears the count.
	if got := v.offer(served(10, 100, 5, "4"), now, true); got.kind != verdictVerified {
		t.Fatalf("%+v", got)
	}
	if got := v.offer(served(10, 999, 5, "5"), now, true); got.inARow != 1 {
		t.Fatalf("%+v", got)
	}
}

func TestVerifierIntervalHasJitterAndZeroIsOff(t *testing.T) {
	v := newVerifier(100*time.Second, 500)
	now := time.Now()
	for i := 0; i < 100; i++ {
		v.reset(VersionState{1, 1, 1}, now)
		if v.due(now.Add(79*time.Second)) || !v.due(now.Add(121*time.Second)) {
			t.Fatalf("next check at %v, not within 100 s ± 20%%", v.nextAt.Sub(now))
		}
	}
	off := newVerifier(-1, 500)
	off.reset(VersionState{1, 1, 1}, now)
	if off.due(now.Add(1000 * time.Hour)) {
		t.Fatal("verifying while off")
	}
}

func TestVerifierKeepsTheLastVersions(t *testing.T) {
	v := newVerifier(time.Minute, 500)
	now := time.Now()
	v.reset(VersionState{0, 0, 0}, now)
	for i := uint64(1); i <= 1200; i++ {
		v.applied(VersionState{i, i, i}, now)
	}
	if _, ok := v.at(700); ok {
		t.Fatal("version 700 kept: more than 500")
	}
	if s, ok := v.at(701); !ok || s.Sum != 701 {
		t.Fatalf("version 701: %+v %v", s, ok)
	}
}

// Every replica of a deployment started at once must not check at the same moments: each
// process's verifier draws its jitter from a source of its own, seeded apart. Two runs of this test
// binary print their first intervals; they must differ. Each run seeds math/rand's global source
// alike first: go 1.19 leaves it unseeded (seed 1) unless a library seeds it (nats.go 1.22 does, in
// its init), and the application may seed it with what it likes.
func TestVerifierJitterDiffersBetweenProcesses(t *testing.T) {
	if os.Getenv("OUTBOX_PRINT_JITTER") != "" {
		rand.Seed(1)
		v := newVerifier(100*time.Second, 500)
		for i := 0; i < 4; i++ {
			fmt.Println(v.jittered())
		}
		return
	}
	schedule := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestVerifierJitterDiffersBetweenProcesses$")
		cmd.Env = append(os.Environ(), "OUTBOX_PRINT_JITTER=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return string(out)
	}
	first, second := schedule(), schedule()
	if first == second {
		t.Fatalf("two processes jitter alike:\n%s", first)
	}
}
