package outbox

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// How the replica reaches nats-server: the bridge's [nats] settings as nats.go's options.

// NatsOptions say how to reach nats-server: the bridge's [nats] settings.
type NatsOptions struct {
	URL           string // one URL, or several comma-separated
	User          string
	Password      string
	Token         string
	CredsFile     string
	NkeySeedFile  string
	TLSCA         string
	TLSCert       string
	TLSKey        string
	TLSServerName string
	JSDomain      string
}

// options are nats.go's options for o, reconnecting for ever; the files read now.
func (o NatsOptions) options() ([]nats.Option, error) {
	opts := []nats.Option{nats.Name("outbox-replica"), nats.MaxReconnects(-1)}
	if o.User != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	if o.Token != "" {
		opts = append(opts, nats.Token(o.Token))
	}
	if o.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.NkeySeedFile != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nkey seed %s: %w", o.NkeySeedFile, err)
		}
		opts = append(opts, opt)
	}
	if o.TLSCA != "" || o.TLSCert != "" || o.TLSServerName != "" {
		config, err := o.tlsConfig()
		if err != nil {
			return nil, fmt.Errorf("nats-server TLS: %w", err)
		}
		opts = append(opts, nats.Secure(config))
	}
	return opts, nil
}

func (o NatsOptions) tlsConfig() (*tls.Config, error) {
	// nats.go names the server by its URL's host when ServerName is empty: a certificate for an IP
	// address is checked against that address, as nats.c does.
	config := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.TLSServerName}
	if o.TLSCA != "" {
		pem, err := os.ReadFile(o.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("cannot read '%s': %w", o.TLSCA, errors.Unwrap(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("'%s' holds no PEM CA certificate", o.TLSCA)
		}
		config.RootCAs = pool
	}
	if o.TLSCert != "" {
		pair, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("'%s' and '%s' are no certificate and key: %w", o.TLSCert, o.TLSKey, err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

// Check reads the files o names (TLS, nkey seed, creds) as connecting would, so that one that
// cannot be used is said at once, naming its flag: names maps "tls_ca", "tls_cert", "tls_key",
// "nkey_seed_file" and "creds_file" to what the caller calls them (default nats.<key>).
func (o NatsOptions) Check(names map[string]string) error {
	name := func(key string) string {
		if n, ok := names[key]; ok {
			return n
		}
		return "nats." + key
	}
	if o.TLSCA != "" {
		if _, err := (NatsOptions{TLSCA: o.TLSCA}).tlsConfig(); err != nil {
			return fmt.Errorf("%s: %v", name("tls_ca"), err)
		}
	}
	if o.TLSCert != "" || o.TLSKey != "" {
		if _, err := (NatsOptions{TLSCert: o.TLSCert, TLSKey: o.TLSKey}).tlsConfig(); err != nil {
			return fmt.Errorf("%s, %s: %v", name("tls_cert"), name("tls_key"), err)
		}
	}
	if o.NkeySeedFile != "" {
		seed, err := os.ReadFile(o.NkeySeedFile)
		var kp nkeys.KeyPair
		if err == nil {
			kp, err = nkeys.ParseDecoratedNKey(seed)
		}
		if err == nil {
			var public string
			if public, err = kp.PublicKey(); err == nil && !nkeys.IsValidPublicUserKey(public) {
				err = errors.New("not a user seed")
			}
		}
		if err != nil {
			return fmt.Errorf("%s: holds no NATS user nkey seed (a word of the 58 characters of an \"SU...\" seed)",
				name("nkey_seed_file"))
		}
	}
	if o.CredsFile != "" {
		creds, err := os.ReadFile(o.CredsFile)
		if err == nil {
			_, err = nkeys.ParseDecoratedJWT(creds)
		}
		if err == nil {
			_, err = nkeys.ParseDecoratedNKey(creds)
		}
		if err != nil {
			return fmt.Errorf("%s: not a creds file (a JWT and an nkey seed): %v", name("creds_file"), err)
		}
	}
	return nil
}
