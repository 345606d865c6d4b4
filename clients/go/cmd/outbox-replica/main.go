// outbox-replica: the Go consumer on the command line, with the flags, environment, output lines
// and --dump JSON of `outbox-bridge replica` (src/cli/replica.cpp).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	outbox "outbox-bridge/clients/go"
)

const usageText = `The reference consumer: bootstrap from a snapshot, verify it, follow the stream, print the state changes
Usage: outbox-replica [OPTIONS]

Options:
  -h,--help                   Print this help message and exit
  --url TEXT REQUIRED         the bridge's base URL, e.g. http://127.0.0.1:8080
  --source TEXT:NAME REQUIRED source name
  --nats TEXT (Env:OUTBOX_BRIDGE_NATS_URL)
                              nats-server URL, or several comma-separated (default nats://127.0.0.1:4222)
  --nats-user TEXT (Env:OUTBOX_BRIDGE_NATS_USER)
  --nats-creds TEXT (Env:OUTBOX_BRIDGE_NATS_CREDS_FILE)
  --nats-nkey-seed TEXT (Env:OUTBOX_BRIDGE_NATS_NKEY_SEED_FILE)
  --nats-ca TEXT (Env:OUTBOX_BRIDGE_NATS_TLS_CA)
  --nats-cert TEXT (Env:OUTBOX_BRIDGE_NATS_TLS_CERT)
  --nats-key TEXT (Env:OUTBOX_BRIDGE_NATS_TLS_KEY)
  --nats-server-name TEXT (Env:OUTBOX_BRIDGE_NATS_TLS_SERVER_NAME)
  --nats-js-domain TEXT (Env:OUTBOX_BRIDGE_NATS_JS_DOMAIN)
                              as the same settings of the bridge's [nats] config; the password
                              and the token by OUTBOX_BRIDGE_NATS_PASSWORD / _TOKEN (or _FILE) only
  --dump TEXT:FILE            write the replica as JSON to this file after each verification and at exit
  --inbox TEXT (Env:OUTBOX_REPLICA_INBOX)
                              keep the replica and its inbox row in this MySQL/MariaDB database (a DSN
                              as a source's, mysql://USER@HOST[:PORT]/DATABASE[?ssl-mode=...&ssl-ca=...
                              &ssl-cert=...&ssl-key=...]; the password by OUTBOX_REPLICA_INBOX_PASSWORD
                              or _FILE): a restart resumes from it (default: in memory)
  --verify-interval FLOAT:SECONDS
                              seconds between checks against ?summary=true, ±20% (default 300; 0: never)
  --duration FLOAT:SECONDS    stop after this many seconds (default: run until SIGTERM)
`

// usageError: exit 2 with the reason, as the C++ command's CLI11 does.
func usageError(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\nRun with --help for more information.\n", a...)
	os.Exit(2)
}

func printLine(line string) {
	fmt.Printf("%sZ %s\n", time.Now().UTC().Format("2006-01-02T15:04:05"), line)
}

// secret: VAR, or the first line of the file VAR_FILE names; "" when neither is set.
func secret(variable string) string {
	if v, ok := os.LookupEnv(variable); ok {
		return v
	}
	file, ok := os.LookupEnv(variable + "_FILE")
	if !ok {
		return ""
	}
	content, err := readSmallFile(file, maxSecretBytes)
	if err != nil {
		usageError("replica: %s_FILE: %v", variable, err)
	}
	line, _, _ := strings.Cut(string(content), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" || strings.ContainsRune(line, 0) {
		usageError("replica: %s_FILE: '%s' holds no secret on its first line, or a NUL", variable, file)
	}
	return line
}

// maxSecretBytes: a password, token or seed file (src/config/config.h, kMaxSecretBytes).
const maxSecretBytes = 64 << 10

// readSmallFile: the regular file's content, at most max bytes (src/config/files.cpp): a FIFO
// or a device would block or never end.
func readSmallFile(path string, max int64) ([]byte, error) {
	if path == "" {
		return nil, errors.New("the file name is empty")
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot read '%s': %v", path, errors.Unwrap(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		kind := "not a regular file"
		if err == nil && st.IsDir() {
			kind = "a directory"
		} else if err == nil && st.Mode()&os.ModeNamedPipe != 0 {
			kind = "a FIFO"
		}
		return nil, fmt.Errorf("'%s' is %s, not a file", path, kind)
	}
	content, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read '%s': %v", path, err)
	}
	if int64(len(content)) > max {
		return nil, fmt.Errorf("'%s' is larger than %d bytes", path, max)
	}
	return content, nil
}

var natsFlags = []struct{ flag, variable string }{
	{"nats-user", "USER"}, {"nats-creds", "CREDS_FILE"}, {"nats-nkey-seed", "NKEY_SEED_FILE"},
	{"nats-ca", "TLS_CA"}, {"nats-cert", "TLS_CERT"}, {"nats-key", "TLS_KEY"},
	{"nats-server-name", "TLS_SERVER_NAME"}, {"nats-js-domain", "JS_DOMAIN"},
}

var (
	baseURL    = regexp.MustCompile(`^https?://[^/?#\s]+$`)
	natsURL    = regexp.MustCompile(`^(nats|tls)://[^/?#\s]+$`)
	sourceName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// maxFlagSeconds: 100 years, the most a flag of seconds takes (src/cli/cli.h, kMaxFlagSeconds).
const maxFlagSeconds = 36525 * 86400

// decimalSeconds: digits without a leading zero (a lone 0 is fine), optionally '.' and digits, as
// the C++ command's flags take them (src/cli/common.cpp, secondsBetween): no sign, exponent, hex,
// space, NaN or infinity.
var decimalSeconds = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]+)?$`)

// seconds: the flag's number of seconds, from 0 to max (fallback when not given); exit 2 otherwise.
func seconds(flags map[string]*string, name string, fallback, max float64) float64 {
	text := *flags[name]
	if text == "" {
		return fallback
	}
	if max > maxFlagSeconds {
		max = maxFlagSeconds
	}
	years := ""
	if max == maxFlagSeconds {
		years = " (100 years)"
	}
	v, err := strconv.ParseFloat(text, 64)
	if len(text) > 30 || !decimalSeconds.MatchString(text) || err != nil || v < 0 || v > max {
		usageError("--%s: must be a number of seconds from 0 to %g%s, in decimal (e.g. 2.5)", name, max, years)
	}
	return v
}

func main() {
	fs := flag.NewFlagSet("outbox-replica", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // its errors are said once, by usageError
	fs.Usage = func() {}
	flags := map[string]*string{}
	for _, name := range []string{"url", "source", "nats", "dump", "inbox", "verify-interval", "duration"} {
		flags[name] = fs.String(name, "", "")
	}
	for _, n := range natsFlags {
		flags[n.flag] = fs.String(n.flag, "", "")
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Print(usageText)
			os.Exit(0)
		}
		usageError("%v", err)
	}
	if fs.NArg() > 0 {
		usageError("unexpected argument '%s'", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	// Flag, else environment variable (an empty one counts as unset, as for the C++ command).
	flagOrEnv := func(name, variable string) string {
		if given[name] {
			return *flags[name]
		}
		return os.Getenv(variable)
	}
	url := strings.TrimSuffix(*flags["url"], "/")
	source := *flags["source"]
	if !given["url"] {
		usageError("--url is required")
	}
	if !given["source"] {
		usageError("--source is required")
	}
	if strings.Contains(url, "@") {
		usageError("--url: no credentials in the URL (it is printed in messages): give http[s]://HOST[:PORT]")
	}
	if !baseURL.MatchString(url) {
		usageError("--url: '%s' must be http[s]://HOST[:PORT]", url)
	}
	if !sourceName.MatchString(source) {
		usageError("--source: must be a source name (^[A-Za-z_][A-Za-z0-9_]{0,63}$)")
	}
	nats := flagOrEnv("nats", "OUTBOX_BRIDGE_NATS_URL")
	if nats == "" {
		nats = "nats://127.0.0.1:4222"
	}
	for _, u := range strings.Split(nats, ",") {
		u = strings.TrimSuffix(strings.TrimSpace(u), "/")
		if strings.Contains(u, "@") {
			usageError("--nats: no credentials in the URL: set user and password_file, or token_file")
		}
		if !natsURL.MatchString(u) {
			usageError("--nats: '%s' must start with nats:// or tls://", u)
		}
	}
	verifyInterval := seconds(flags, "verify-interval", 300, 86400)
	if verifyInterval > 0 && verifyInterval < 0.001 {
		// Below the C++ command's millisecond: no interval a check could keep (it became 0, which
		// the library reads as its default of 300 s).
		usageError("--verify-interval: must be 0 (never) or at least 0.001 seconds")
	}
	duration := seconds(flags, "duration", 0, maxFlagSeconds)
	dump := *flags["dump"]
	if given["dump"] {
		dir := filepath.Dir(dump)
		if dump == "" || strings.HasSuffix(dump, "/") {
			usageError("--dump: must name a file")
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			usageError("--dump: the directory '%s/' does not exist", dir)
		}
	}
	o := outbox.NatsOptions{URL: nats}
	fields := map[string]*string{"nats-user": &o.User, "nats-creds": &o.CredsFile, "nats-nkey-seed": &o.NkeySeedFile,
		"nats-ca": &o.TLSCA, "nats-cert": &o.TLSCert, "nats-key": &o.TLSKey, "nats-server-name": &o.TLSServerName,
		"nats-js-domain": &o.JSDomain}
	for _, n := range natsFlags {
		*fields[n.flag] = flagOrEnv(n.flag, "OUTBOX_BRIDGE_NATS_"+n.variable)
	}
	o.Password = secret("OUTBOX_BRIDGE_NATS_PASSWORD")
	o.Token = secret("OUTBOX_BRIDGE_NATS_TOKEN")
	logins := 0
	for _, s := range []string{o.User, o.Token, o.CredsFile, o.NkeySeedFile} {
		if s != "" {
			logins++
		}
	}
	if logins > 1 {
		usageError("replica: give one way to log in to nats-server (user, token, creds, nkey seed)")
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		usageError("replica: --nats-cert and --nats-key go together")
	}
	if err := o.Check(map[string]string{"tls_ca": "--nats-ca", "tls_cert": "--nats-cert", "tls_key": "--nats-key",
		"creds_file": "--nats-creds", "nkey_seed_file": "--nats-nkey-seed"}); err != nil {
		usageError("replica: %v", err)
	}
	run(source, url, o, flagOrEnv("inbox", "OUTBOX_REPLICA_INBOX"), dump, verifyInterval, duration)
}
