package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The command line as a user meets it: this test binary runs main() when OUTBOX_REPLICA_MAIN is
// set, with the arguments after "--".

func TestMain(m *testing.M) {
	if os.Getenv("OUTBOX_REPLICA_MAIN") != "" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"outbox-replica"}, os.Args[i+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// replicaCLI runs the command with args and env; its exit code, stdout and stderr.
func replicaCLI(t *testing.T, limit time.Duration, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(append(os.Environ(), "OUTBOX_REPLICA_MAIN=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v: still running after %v\n%s%s", args, limit, stdout.String(), stderr.String())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

var required = []string{"--url", "http://127.0.0.1:1", "--source", "account"}

func TestUnknownFlagIsSaidOnce(t *testing.T) {
	code, _, stderr := replicaCLI(t, 10*time.Second, nil, append(required, "--no-such-flag")...)
	if code != 2 || strings.Count(stderr, "no-such-flag") != 1 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}

// --verify-interval as the C++ command takes it (CLI11's secondsBetween): decimal seconds from 0 to
// 86400; and none below its millisecond that would not be 0 (it became the default, 300 s).
func TestVerifyIntervalOutOfItsRangeIsRefused(t *testing.T) {
	for _, text := range []string{"0.0000000001", "0.0001", "1e2", "-1", "86401", "0x10", "NaN", "05", " 5"} {
		code, _, stderr := replicaCLI(t, 10*time.Second, nil, append(required, "--verify-interval", text)...)
		if code != 2 || !strings.Contains(stderr, "--verify-interval") {
			t.Errorf("--verify-interval %q: exit %d:\n%s", text, code, stderr)
		}
	}
}

// A _FILE secret is read as the C++ command reads it: at most 64 KiB, a regular file.
func TestSecretFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 64<<10+1), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for file, says := range map[string]string{big: "larger than 65536 bytes", fifo: "not a file", dir: "not a file"} {
		code, _, stderr := replicaCLI(t, 10*time.Second, []string{"OUTBOX_BRIDGE_NATS_PASSWORD_FILE=" + file},
			required...)
		if code != 2 || !strings.Contains(stderr, says) {
			t.Errorf("%s: exit %d:\n%s", file, code, stderr)
		}
	}
}

// The last --dump, after the stop, with --inbox on a database that does not answer: given up on,
// the process ends (not after the driver's 120 s read timeout).
func TestLastDumpOnADatabaseThatDoesNotAnswerIsBounded(t *testing.T) {
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
			defer c.Close() // held open, never answered
		}
	}()
	dump := filepath.Join(t.TempDir(), "account.json")
	start := time.Now()
	code, stdout, stderr := replicaCLI(t, 30*time.Second, []string{"OUTBOX_REPLICA_INBOX_PASSWORD=x"},
		append(required, "--inbox", "mysql://replica@"+silent.Addr().String()+"/replica", "--dump", dump,
			"--duration", "0.5")...)
	if code != 0 || !strings.Contains(stdout, "the last --dump was not written") || time.Since(start) > 15*time.Second {
		t.Fatalf("exit %d after %v:\n%s%s", code, time.Since(start), stdout, stderr)
	}
}
