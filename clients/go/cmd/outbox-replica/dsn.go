package main

// The DSN of --inbox: a source's of the bridge (README, "Sources"), read by the same rules
// (src/config/values.cpp, Dsn::parse; clients/typescript/src/cli_inbox.ts, parseMysqlDsn), as
// go-sql-driver/mysql's connector.

import (
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

type mysqlDSN struct {
	user, password, host string
	port                 int
	database, socket     string
	sslMode              string
	sslCA, sslCert       string
	sslKey               string
}

const dsnForm = "expected mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE&...]"

var (
	sslModes     = []string{"DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"}
	hostName     = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,253}$`)
	databaseName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	special      = regexp.MustCompile(`[/?#\[\]]`)
)

func decode(text string) (string, error) {
	s, err := url.PathUnescape(text)
	if err != nil {
		return "", errors.New("a bad %XX escape")
	}
	return s, nil
}

// parseDSN reads text as the bridge reads a source's DSN; the error says why it is not one,
// never echoing a password.
func parseDSN(text string) (*mysqlDSN, error) {
	if !strings.HasPrefix(text, "mysql://") {
		return nil, fmt.Errorf("must start with mysql:// (%s)", dsnForm)
	}
	rest := strings.TrimPrefix(text, "mysql://")
	at := strings.IndexByte(rest, '@')
	if at < 0 {
		return nil, fmt.Errorf("no USER@ (%s)", dsnForm)
	}
	path := indexFrom(rest, "/", at)
	query := indexFrom(rest, "?", at)
	if path >= 0 {
		query = indexFrom(rest, "?", path)
	}
	first := special.FindStringIndex(rest)
	second := indexFrom(rest, "@", at+1)
	if (first != nil && first[0] < at) || (second >= 0 && (query < 0 || second < query)) {
		return nil, errors.New("the user or password holds an unescaped '@', '/', '?', '#', '[' or ']': %-escape them")
	}
	userinfo := rest[:at]
	rest = rest[at+1:]
	d := &mysqlDSN{port: 3306, sslMode: "PREFERRED"}
	var err error
	name, pass, hasPass := strings.Cut(userinfo, ":")
	if d.user, err = decode(name); err != nil {
		return nil, err
	}
	if hasPass {
		if d.password, err = decode(pass); err != nil {
			return nil, err
		}
	}
	if d.user == "" {
		return nil, errors.New("the user is empty")
	}
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return nil, fmt.Errorf("no /DATABASE (%s)", dsnForm)
	}
	hostport, port := rest[:slash], ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return nil, errors.New("an IPv6 host without its closing ']'")
		}
		d.host = hostport[1:end]
		after := hostport[end+1:]
		if after != "" && !strings.HasPrefix(after, ":") {
			return nil, errors.New("text after the IPv6 host")
		}
		port = strings.TrimPrefix(after, ":")
	} else {
		d.host = hostport
		if c := strings.LastIndexByte(hostport, ':'); c >= 0 {
			d.host, port = hostport[:c], hostport[c+1:]
		}
		if strings.Contains(d.host, ":") {
			return nil, errors.New("an IPv6 host must be in brackets: mysql://USER@[::1]:3306/DATABASE")
		}
	}
	if d.host == "" {
		return nil, errors.New("the host is empty")
	}
	if !hostName.MatchString(d.host) {
		return nil, fmt.Errorf("the host '%s' is not a host name or an IP address", d.host)
	}
	if port != "" || strings.HasSuffix(hostport, ":") {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strings.TrimLeft(port, "0123456789") != "" {
			return nil, fmt.Errorf("bad port '%s'", port)
		}
		d.port = n
	}
	database, params, hasParams := strings.Cut(rest[slash+1:], "?")
	if !databaseName.MatchString(database) {
		return nil, fmt.Errorf("database '%s' must match ^[A-Za-z_][A-Za-z0-9_]{0,63}$", database)
	}
	d.database = database
	if err := d.takeParams(params, hasParams); err != nil {
		return nil, err
	}
	return d, nil
}

func indexFrom(s, sub string, from int) int {
	if from > len(s) {
		return -1
	}
	if i := strings.Index(s[from:], sub); i >= 0 {
		return from + i
	}
	return -1
}

func (d *mysqlDSN) takeParams(params string, has bool) error {
	modeGiven := false
	if has {
		if params == "" || strings.HasSuffix(params, "&") || strings.Contains(params, "&&") {
			return errors.New("an empty DSN parameter")
		}
		given := map[string]bool{}
		for _, item := range strings.Split(params, "&") {
			name, raw, _ := strings.Cut(item, "=")
			if given[name] {
				return fmt.Errorf("DSN parameter '%s' given twice", name)
			}
			given[name] = true
			value, err := decode(raw)
			if err != nil {
				return err
			}
			if value == "" {
				return fmt.Errorf("DSN parameter '%s' has no value", name)
			}
			switch name {
			case "socket":
				d.socket = value
			case "ssl-mode":
				d.sslMode = strings.ToUpper(value)
				known := false
				for _, m := range sslModes {
					known = known || m == d.sslMode
				}
				if !known {
					return fmt.Errorf("ssl-mode '%s' is not one of %s", value, strings.Join(sslModes, ", "))
				}
				modeGiven = true
			case "ssl-ca":
				d.sslCA = value
			case "ssl-cert":
				d.sslCert = value
			case "ssl-key":
				d.sslKey = value
			default:
				return fmt.Errorf("unknown DSN parameter '%s' (known: socket, ssl-mode, ssl-ca, ssl-cert, ssl-key)", name)
			}
		}
	}
	if d.socket != "" && d.host != "localhost" {
		return fmt.Errorf("socket= needs the host localhost, not '%s'", d.host)
	}
	anyFile := d.sslCA != "" || d.sslCert != "" || d.sslKey != ""
	if !modeGiven {
		switch {
		case d.sslCA != "":
			d.sslMode = "VERIFY_CA"
		case d.sslCert != "" || d.sslKey != "":
			d.sslMode = "REQUIRED"
		case d.socket != "":
			d.sslMode = "DISABLED"
		}
	}
	if d.sslMode == "DISABLED" && anyFile {
		return errors.New("ssl-ca, ssl-cert and ssl-key need TLS, but ssl-mode is DISABLED")
	}
	if d.sslMode == "PREFERRED" && anyFile {
		return errors.New("ssl-mode PREFERRED falls back to plain text: with ssl-ca, ssl-cert or ssl-key use " +
			"REQUIRED, VERIFY_CA or VERIFY_IDENTITY")
	}
	if (d.sslCert == "") != (d.sslKey == "") {
		return errors.New("ssl-cert and ssl-key go together")
	}
	if d.sslMode == "VERIFY_CA" && d.sslCA == "" {
		return errors.New("ssl-mode VERIFY_CA needs ssl-ca=PATH")
	}
	return nil
}

// tlsConfig: REQUIRED and PREFERRED take any certificate; VERIFY_CA checks it against ssl-ca, not
// the name it is for; VERIFY_IDENTITY both. The files are read now: one that cannot be is a
// usage error, before anything connects.
func (d *mysqlDSN) tlsConfig() (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: d.host, InsecureSkipVerify: true}
	var pool *x509.CertPool
	if d.sslCA != "" {
		pem, err := os.ReadFile(d.sslCA)
		if err != nil {
			return nil, fmt.Errorf("ssl-ca: %v", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ssl-ca: '%s' holds no PEM certificate", d.sslCA)
		}
	}
	if d.sslCert != "" {
		pair, err := tls.LoadX509KeyPair(d.sslCert, d.sslKey)
		if err != nil {
			return nil, fmt.Errorf("ssl-cert and ssl-key: %v", err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	switch d.sslMode {
	case "VERIFY_IDENTITY":
		config.InsecureSkipVerify = false
		config.RootCAs = pool
	case "VERIFY_CA":
		config.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			certs := make([]*x509.Certificate, len(raw))
			for i, r := range raw {
				c, err := x509.ParseCertificate(r)
				if err != nil {
					return err
				}
				certs[i] = c
			}
			if len(certs) == 0 {
				return errors.New("no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range certs[1:] {
				inter.AddCert(c)
			}
			_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter})
			return err
		}
	}
	return config, nil
}

// open: the database/sql handle of the DSN, with the password given apart.
func (d *mysqlDSN) open(password string) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.DBName = d.user, password, d.database
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(d.host, strconv.Itoa(d.port))
	if d.socket != "" {
		cfg.Net, cfg.Addr = "unix", d.socket
	}
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 5*time.Second, 120*time.Second, 120*time.Second
	cfg.InterpolateParams = true // one round trip a statement, not a prepare and an execute
	switch d.sslMode {
	case "DISABLED":
	case "PREFERRED":
		cfg.TLSConfig = "preferred"
	default:
		config, err := d.tlsConfig()
		if err != nil {
			return nil, err
		}
		name := "outbox-inbox"
		if err := mysql.RegisterTLSConfig(name, config); err != nil {
			return nil, err
		}
		cfg.TLSConfig = name
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(2)
	return db, nil
}
