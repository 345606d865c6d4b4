package outbox

import (
	"context"
	"sort"
)

// Where a replica keeps what it has applied (docs/consumers.md section 5): the inbox row — the
// source's epoch, the last version applied and where to resume — changed together with the
// change it records, so a consumer stopped at any moment applies no version twice and skips none.

// InboxRow is the inbox row of one source, with what keeping the checksum needs.
type InboxRow struct {
	Epoch          uint64
	AppliedVersion uint64
	StreamName     string
	StreamSeq      uint64 // the stream sequence of AppliedVersion's message: resume from StreamSeq + 1
	Key            string // the snapshot's key field
	Columns        []string
	Numeric        []bool // per column: written as a JSON number
	Sum            uint64 // the sum of the records' hashes, mod 2^64 (the checksum)
	RecordCount    uint64
	Generation     uint64 // bootstraps of this source in the store: one meanwhile moves the row
}

// Change is one change, handed to the application with its version.
type Change struct {
	Source     string
	Epoch      uint64
	Version    uint64
	StreamSeq  uint64
	Subject    string
	EntityType string
	Key        string // Outbox-Entity-Key
	Delete     bool   // Outbox-Op delete; else an upsert
	Columns    []string
	Values     []Value // an upsert's record in column order; nil for a delete
	Payload    []byte  // the body as the producer built it (empty for a delete)
	Headers    map[string][]string
}

// Bootstrap is a bootstrap being written: records in batches, then Commit (all of it counts) or
// Abort (none).
type Bootstrap interface {
	Records(ctx context.Context, columns []string, batch []SnapshotRecord) error
	// Commit makes row (its generation aside) and the records the store's; it returns the row as
	// stored.
	Commit(ctx context.Context, row InboxRow) (InboxRow, error)
	Abort(ctx context.Context) error
}

// Store is what a Replica keeps its state in.
type Store interface {
	// Load is the source's inbox row, or nil when there is none (nothing bootstrapped yet).
	Load(ctx context.Context, source string) (*InboxRow, error)
	// BeginBootstrap begins replacing what the store holds of source with a snapshot's records.
	BeginBootstrap(ctx context.Context, source string, header *SnapshotHeader) (Bootstrap, error)
	// Apply applies change (change.Version = from.AppliedVersion + 1) and moves the inbox row on
	// in one step: the new row, or nil — having changed nothing — when the stored row is no
	// longer from (its epoch, version or generation: another consumer moved it).
	Apply(ctx context.Context, change *Change, from InboxRow) (*InboxRow, error)
}

// NextRow is the row after change, given the hash of the record it replaces or removes (old)
// and of the one it writes (new), each nil when there is none.
func NextRow(from InboxRow, change *Change, oldHash, newHash *uint64) InboxRow {
	next := from
	if oldHash != nil {
		next.Sum -= *oldHash
		next.RecordCount--
	}
	if newHash != nil {
		next.Sum += *newHash
		next.RecordCount++
	}
	next.AppliedVersion = change.Version
	next.StreamSeq = change.StreamSeq
	return next
}

// MemoryStore keeps records in memory, for caches and the CLI: a new process starts empty and
// bootstraps. The same store handed to a new Replica in one process resumes where the last one
// stopped. Safe for one Replica at a time and readers (Records) between its calls.
type MemoryStore struct {
	sources map[string]*memorySource
}

type memorySource struct {
	row     InboxRow
	records map[string][]Value
}

// NewMemoryStore is an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{sources: map[string]*memorySource{}} }

// Records of source, by key.
func (m *MemoryStore) Records(source string) map[string][]Value {
	if s := m.sources[source]; s != nil {
		return s.records
	}
	return map[string][]Value{}
}

func (m *MemoryStore) Load(_ context.Context, source string) (*InboxRow, error) {
	if s := m.sources[source]; s != nil {
		row := s.row
		return &row, nil
	}
	return nil, nil
}

type memoryBootstrap struct {
	store   *MemoryStore
	source  string
	records map[string][]Value
}

func (m *MemoryStore) BeginBootstrap(_ context.Context, source string, _ *SnapshotHeader) (Bootstrap, error) {
	return &memoryBootstrap{m, source, map[string][]Value{}}, nil
}

func (b *memoryBootstrap) Records(_ context.Context, _ []string, batch []SnapshotRecord) error {
	for _, r := range batch {
		b.records[r.Key] = r.Values
	}
	return nil
}

func (b *memoryBootstrap) Commit(_ context.Context, row InboxRow) (InboxRow, error) {
	row.Generation = 1
	if s := b.store.sources[b.source]; s != nil {
		row.Generation = s.row.Generation + 1
	}
	b.store.sources[b.source] = &memorySource{row, b.records}
	return row, nil
}

func (b *memoryBootstrap) Abort(context.Context) error {
	b.records = nil
	return nil
}

func (m *MemoryStore) Apply(_ context.Context, change *Change, from InboxRow) (*InboxRow, error) {
	s := m.sources[change.Source]
	if s == nil || s.row.Epoch != from.Epoch || s.row.AppliedVersion != from.AppliedVersion ||
		s.row.Generation != from.Generation {
		return nil, nil
	}
	var oldHash, newHash *uint64
	if old, ok := s.records[change.Key]; ok {
		h := RecordHash(old)
		oldHash = &h
	}
	if change.Values != nil {
		h := RecordHash(change.Values)
		newHash = &h
		s.records[change.Key] = change.Values
	} else {
		delete(s.records, change.Key)
	}
	s.row = NextRow(from, change, oldHash, newHash)
	row := s.row
	return &row, nil
}

// sortedKeys are the keys of records in the byte order of the keys (--dump's order).
func sortedKeys[V any](records map[string]V) []string {
	keys := make([]string, 0, len(records))
	for k := range records {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
