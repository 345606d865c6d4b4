package main

import (
	"bufio"
	"context"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	outbox "outbox-bridge/clients/go"
)

// run: the replica until SIGTERM, SIGINT or --duration; --dump after each verification and at
// exit; the last line says where it stopped.
func run(source, url string, o outbox.NatsOptions, inboxDSN, dump string, verifyInterval, duration float64) {
	var inbox *cliInbox
	if inboxDSN != "" {
		dsn, err := parseDSN(inboxDSN)
		if err != nil {
			usageError("replica: --inbox: %v", err)
		}
		if dsn.password != "" {
			usageError("replica: --inbox: no password in the DSN (it would show in `ps`): set " +
				"OUTBOX_REPLICA_INBOX_PASSWORD or OUTBOX_REPLICA_INBOX_PASSWORD_FILE")
		}
		db, err := dsn.open(secret("OUTBOX_REPLICA_INBOX_PASSWORD"))
		if err != nil {
			usageError("replica: --inbox: %v", err)
		}
		defer db.Close()
		inbox = newCliInbox(db, source)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if duration > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, time.Duration(duration*float64(time.Second)))
		defer stop()
	}
	interval := time.Duration(verifyInterval * float64(time.Second))
	if verifyInterval == 0 {
		interval = -1 // never
	}
	var replica *outbox.Replica
	memory := outbox.NewMemoryStore()
	var store outbox.Store = memory
	if inbox != nil {
		store = inbox.store
	}
	writeDump := func(ctx context.Context) error {
		if dump == "" {
			return nil
		}
		tmp := dump + ".tmp"
		f, err := os.Create(tmp)
		if err != nil {
			return err
		}
		w := bufio.NewWriterSize(f, 1<<16)
		if inbox != nil {
			err = inbox.dump(ctx, w)
		} else {
			_, err = w.WriteString(outbox.DumpJSON(source, replica.Inbox(), memory.Records(source)))
		}
		if err == nil {
			err = w.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		return os.Rename(tmp, dump)
	}
	replica = outbox.NewReplica(outbox.ReplicaOptions{URL: url, Source: source, NATS: o, Store: store,
		VerifyInterval: interval, Report: func(line string) {
			printLine(line)
			if strings.Contains(line, "] verified at version") {
				if err := writeDump(ctx); err != nil {
					printLine("[" + source + "] --dump: " + err.Error())
				}
			}
		}})
	if inbox != nil {
		// Until the tables exist, nothing can be resumed or applied: a database that cannot be
		// reached yet is retried, as nats-server is.
		for delay := 200 * time.Millisecond; ctx.Err() == nil; delay = longest(delay*2, 10*time.Second) {
			err := inbox.createTables(ctx)
			if err == nil {
				break
			}
			printLine("[" + source + "] the inbox's tables: " + err.Error() + "; retrying in " +
				strconv.FormatInt(delay.Milliseconds(), 10) + " ms")
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
		}
	}
	_ = replica.Run(ctx)
	// Always: a re-bootstrap at the version last dumped (a checksum that differed there) changed
	// the records, and a dump skipped then kept the ones the source no longer has.
	// Bounded: a database that stopped answering does not keep a stopped process (the driver's
	// read timeout is 120 s).
	last, stopLast := context.WithTimeout(context.Background(), 5*time.Second)
	if err := writeDump(last); err != nil {
		printLine("[" + source + "] the last --dump was not written: " + err.Error())
	}
	stopLast()
	var version, count uint64
	if row := replica.Inbox(); row != nil {
		version, count = row.AppliedVersion, row.RecordCount
	}
	printLine("[" + source + "] stopped at version " + strconv.FormatUint(version, 10) + " (" + strconv.FormatUint(count, 10) +
		" records, checksum verified at version " + strconv.FormatUint(replica.LastVerifiedVersion(), 10) + ")")
	replica.Close()
}

// longest: d, at most max.
func longest(d, max time.Duration) time.Duration {
	if d > max {
		return max
	}
	return d
}
