package outbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// The replica's GETs of the bridge (docs/consumers.md section 2): streamed, ended by the caller's
// context, and given up on when nothing arrives for ReplicaOptions.IdleTimeout — waiting for the
// headers, or inside one read of the body. The time the store takes between reads does not
// count: src/replica/replica.cpp's read timeout is per read of the socket too. http.Client's
// Timeout would bound the whole download, and cut a large snapshot every time.

// get is a GET of the bridge's snapshot (summary: ?summary=true), the response streaming.
func (r *Replica) get(ctx context.Context, summary bool) (*http.Response, string, error) {
	u := fmt.Sprintf("%s/v1/sources/%s/control-snapshot", r.opts.URL, url.PathEscape(r.opts.Source))
	if summary {
		u += "?summary=true"
	}
	ctx, cancel := context.WithCancel(ctx)
	body := &idleBody{idle: r.opts.IdleTimeout, cancel: cancel}
	body.timer = time.AfterFunc(body.idle, body.fire)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		body.stop()
		return nil, u, err
	}
	res, err := r.http.Do(req)
	body.timer.Stop()
	if err != nil {
		body.stop()
		return nil, u, retryable("GET %s: %v", u, body.explain(unwrapURLError(err)))
	}
	body.ReadCloser = res.Body
	res.Body = body
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		buf := make([]byte, 4096)
		n, _ := res.Body.Read(buf)
		return nil, u, retryable("GET %s: HTTP %d: %s", u, res.StatusCode, buf[:n])
	}
	return res, u, nil
}

// idleBody is a response's body whose every Read must bring something within idle; past it, the
// request's context is cancelled and the read says why.
type idleBody struct {
	io.ReadCloser
	idle   time.Duration
	timer  *time.Timer
	cancel context.CancelFunc
	fired  atomic.Bool
}

func (b *idleBody) fire() {
	b.fired.Store(true)
	b.cancel()
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.idle)
	n, err := b.ReadCloser.Read(p)
	b.timer.Stop()
	if err != nil && err != io.EOF {
		err = b.explain(err)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.stop()
	return b.ReadCloser.Close()
}

func (b *idleBody) stop() {
	b.timer.Stop()
	b.cancel()
}

// explain: the error of a read the idle timer cut, as that.
func (b *idleBody) explain(err error) error {
	if b.fired.Load() {
		return fmt.Errorf("nothing arrived for %v: %w", b.idle, err)
	}
	return err
}

func unwrapURLError(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}
