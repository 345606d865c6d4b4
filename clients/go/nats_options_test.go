package outbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// --nats-nkey-seed against a nats-server of this test's own that lets in one nkey user: that
// user's seed logs in, another's is refused, and Check tells a seed file from one that is not.
func TestNkeySeedLogsIn(t *testing.T) {
	dir := t.TempDir()
	seedFile := func(name string) (string, string) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		public, _ := kp.PublicKey()
		path := filepath.Join(dir, name+".nk")
		if err := os.WriteFile(path, append(seed, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
		return path, public
	}
	allowed, public := seedFile("allowed")
	other, _ := seedFile("other")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	config := filepath.Join(dir, "nats.conf")
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\nauthorization { users = [ { nkey: %q } ] }\n", port, public)
	if err := os.WriteFile(config, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	binary := "/usr/sbin/nats-server"
	if _, err := os.Stat(binary); err != nil {
		binary = "nats-server"
	}
	server := exec.Command(binary, "-c", config)
	var log strings.Builder
	server.Stdout, server.Stderr = &log, &log
	if err := server.Start(); err != nil {
		t.Fatalf("nats-server (tools/packages.txt, role stack): %v", err)
	}
	defer func() { _ = server.Process.Kill(); _ = server.Wait() }()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	waitFor(t, 10*time.Second, "nats-server", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	connect := func(seed string) error {
		o := NatsOptions{URL: url, NkeySeedFile: seed}
		if err := o.Check(nil); err != nil {
			return err
		}
		opts, err := o.options()
		if err != nil {
			return err
		}
		nc, err := nats.Connect(url, append(opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
		}
		return err
	}
	if err := connect(allowed); err != nil {
		t.Fatalf("the allowed user's seed: %v\n%s", err, log.String())
	}
	if err := connect(other); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("another user's seed: %v", err)
	}
	if err := (NatsOptions{NkeySeedFile: config}).Check(map[string]string{"nkey_seed_file": "--nats-nkey-seed"}); err == nil ||
		!strings.HasPrefix(err.Error(), "--nats-nkey-seed: holds no NATS user nkey seed") {
		t.Fatalf("a file that holds no seed: %v", err)
	}
}
