package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The snapshot (docs/consumers.md section 2), read as it streams: records are handed on in
// batches while the body arrives, so a snapshot of millions of records needs the memory of one
// batch, and the count and checksum are checked at its end, before anything read counts.

// SnapshotHeader is what the snapshot says before its records.
type SnapshotHeader struct {
	Source     string
	Epoch      uint64 // sourceEpoch
	Watermark  uint64
	StreamName string
	StreamSeq  uint64
	Key        string // the record field whose text equals Outbox-Entity-Key
}

// SnapshotSummary is a whole snapshot's facts, or a summary (?summary=true).
type SnapshotSummary struct {
	SnapshotHeader
	RecordCount uint64
	Checksum    string // "sha256-sum64:<16 hex digits>"
	Sum         uint64 // the checksum as a number
	Columns     []string
	Numeric     []bool // per column: written as a JSON number
}

// SnapshotRecord is one record: its key and its values in the snapshot's column order.
type SnapshotRecord struct {
	Key    string
	Values []Value
}

// SnapshotRejected is a snapshot that does not check out: it is retried, never used.
type SnapshotRejected struct{ Reason string }

func (e *SnapshotRejected) Error() string { return e.Reason }

func rejected(format string, a ...any) error { return &SnapshotRejected{fmt.Sprintf(format, a...)} }

// OnRecords takes a batch of records; an error from it ends the read, as it is.
type OnRecords func(header *SnapshotHeader, columns []string, batch []SnapshotRecord) error

// readErr keeps the error of the body itself (a connection lost), which the JSON decoder would
// report as a malformed document.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

// ReadSnapshot reads a snapshot or a summary from body, handing its records to onRecords in
// batches of up to batchSize, and returns its facts once the count and checksum match what came
// (expectRecords: a whole snapshot, not a summary). A snapshot cut short, malformed or not
// matching is a *SnapshotRejected.
func ReadSnapshot(body io.Reader, onRecords OnRecords, expectRecords bool, batchSize int) (*SnapshotSummary, error) {
	if batchSize < 1 {
		batchSize = 1000
	}
	src := &readErr{r: body}
	s := &snapshotReader{onRecords: onRecords, batchSize: batchSize}
	dec := json.NewDecoder(src)
	err := s.read(dec)
	if src.err != nil {
		return nil, fmt.Errorf("reading the snapshot: %w", src.err)
	}
	if err != nil {
		var r *SnapshotRejected
		if errors.As(err, &r) {
			return nil, r
		}
		if errors.Is(err, errStore) {
			return nil, errors.Unwrap(err)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, rejected("snapshot cut short")
		}
		return nil, rejected("malformed snapshot (%v)", err)
	}
	return s.finish(expectRecords)
}

var errStore = errors.New("the store")

type storeError struct{ err error }

func (e storeError) Error() string   { return e.err.Error() }
func (e storeError) Unwrap() error   { return e.err }
func (e storeError) Is(t error) bool { return t == errStore }

type snapshotReader struct {
	onRecords   OnRecords
	batchSize   int
	header      SnapshotHeader
	have        map[string]bool
	recordCount *uint64
	checksum    *string
	haveRecords bool
	columns     []string
	numeric     []bool
	keyIndex    int
	count       uint64
	sum         uint64
	batch       []SnapshotRecord
}

func (s *snapshotReader) read(dec *json.Decoder) error {
	s.have = map[string]bool{}
	if err := expectDelim(dec, '{', "not a JSON object"); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		if name == "records" {
			if err := s.readRecords(dec); err != nil {
				return err
			}
			continue
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if err := s.take(name, raw); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return rejected("text after the snapshot")
	}
	return nil
}

func expectDelim(dec *json.Decoder, want json.Delim, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return rejected("%s", what)
	}
	return nil
}

func (s *snapshotReader) requireHeader(where string) error {
	for _, f := range []string{"sourceEpoch", "watermark", "stream", "key"} {
		if !s.have[f] {
			return rejected("snapshot lacks sourceEpoch, watermark, stream or key%s", where)
		}
	}
	return nil
}

func wholeNumber(raw []byte, field string) (uint64, error) {
	n, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil {
		return 0, rejected("%s is not a whole number", field)
	}
	return n, nil
}

func (s *snapshotReader) take(name string, raw json.RawMessage) error {
	var err error
	h := &s.header
	switch name {
	case "schemaVersion":
		if string(raw) != "1" {
			return rejected("unsupported schemaVersion")
		}
	case "source":
		err = json.Unmarshal(raw, &h.Source)
	case "sourceEpoch":
		h.Epoch, err = wholeNumber(raw, "sourceEpoch")
	case "watermark":
		h.Watermark, err = wholeNumber(raw, "watermark")
	case "stream":
		var stream struct {
			Name *string
			Seq  json.RawMessage
		}
		if json.Unmarshal(raw, &stream) != nil || stream.Name == nil {
			return rejected("stream has no name")
		}
		h.StreamName = *stream.Name
		if len(stream.Seq) > 0 {
			h.StreamSeq, err = wholeNumber(stream.Seq, "stream.seq")
		}
	case "key":
		err = json.Unmarshal(raw, &h.Key)
	case "recordCount":
		var n uint64
		n, err = wholeNumber(raw, "recordCount")
		s.recordCount = &n
	case "checksum":
		var c string
		err = json.Unmarshal(raw, &c)
		s.checksum = &c
	}
	if err != nil {
		var r *SnapshotRejected
		if errors.As(err, &r) {
			return err
		}
		return rejected("%s: %v", name, err)
	}
	s.have[name] = true
	return nil
}

func (s *snapshotReader) readRecords(dec *json.Decoder) error {
	if err := expectDelim(dec, '[', "records is not an array"); err != nil {
		return err
	}
	if err := s.requireHeader(" before its records"); err != nil {
		return err
	}
	s.haveRecords = true
	for dec.More() {
		fields, err := readFields(dec)
		if err != nil {
			return err
		}
		if err := s.takeRecord(fields); err != nil {
			return err
		}
		if len(s.batch) >= s.batchSize {
			if err := s.flush(); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return err
	}
	return s.flush()
}

func (s *snapshotReader) flush() error {
	if len(s.batch) == 0 {
		return nil
	}
	batch := s.batch
	s.batch = nil
	if err := s.onRecords(&s.header, s.columns, batch); err != nil {
		return storeError{err}
	}
	return nil
}

func (s *snapshotReader) takeRecord(fields []Field) error {
	if s.count == 0 {
		s.keyIndex = -1
		for i, f := range fields {
			s.columns = append(s.columns, f.Name)
			s.numeric = append(s.numeric, f.Numeric)
			if f.Name == s.header.Key && s.keyIndex < 0 {
				s.keyIndex = i
			}
		}
		if s.keyIndex < 0 {
			return rejected("snapshot key '%s' is not a field of its records", s.header.Key)
		}
	} else {
		if len(fields) != len(s.columns) {
			return rejected("record %d has %d fields, the first has %d", s.count+1, len(fields), len(s.columns))
		}
		for i, f := range fields {
			if f.Name != s.columns[i] {
				return rejected("record %d has fields other than the first record's", s.count+1)
			}
		}
	}
	values := make([]Value, len(fields))
	for i, f := range fields {
		values[i] = f.Text
	}
	s.sum += RecordHash(values)
	s.count++
	key := ""
	if k := values[s.keyIndex]; k != nil {
		key = *k
	}
	s.batch = append(s.batch, SnapshotRecord{key, values})
	return nil
}

func (s *snapshotReader) finish(expectRecords bool) (*SnapshotSummary, error) {
	if err := s.requireHeader(""); err != nil {
		return nil, err
	}
	if s.recordCount == nil || s.checksum == nil {
		return nil, rejected("snapshot cut short: no recordCount or checksum")
	}
	sum, ok := ParseChecksum(*s.checksum)
	if !ok {
		return nil, rejected("bad checksum '%s'", *s.checksum)
	}
	if expectRecords {
		if !s.haveRecords {
			return nil, rejected("snapshot has no records")
		}
		if s.count != *s.recordCount {
			return nil, rejected("recordCount says %d but %d records came", *s.recordCount, s.count)
		}
		if s.sum != sum {
			return nil, rejected("checksum says %s but the records sum to %s", *s.checksum, FormatChecksum(s.sum))
		}
	}
	return &SnapshotSummary{s.header, *s.recordCount, *s.checksum, sum, s.columns, s.numeric}, nil
}
