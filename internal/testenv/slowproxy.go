package testenv

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SlowProxy is a TCP proxy that delays every chunk its upstream sends back
// by a fixed time: an object store far away, or a congested link.
type SlowProxy struct {
	// Addr is where clients connect (host:port).
	Addr string

	l     net.Listener
	wg    sync.WaitGroup
	delay atomic.Int64 // time.Duration
	mu    sync.Mutex
	conns map[net.Conn]bool
	sent  atomic.Int64
}

// Sent is the bytes the proxy has passed back from upstream.
func (p *SlowProxy) Sent() int64 { return p.sent.Load() }

// StartSlowProxy proxies to upstream (host:port), delaying each chunk of
// the responses by delay, until the test ends.
func StartSlowProxy(t testing.TB, upstream string, delay time.Duration) *SlowProxy {
	t.Helper()
	p, err := NewSlowProxy("127.0.0.1", upstream, delay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// NewSlowProxy listens on a free port of host and proxies to upstream
// (host:port), delaying each chunk of the responses by delay, until Close.
func NewSlowProxy(host, upstream string, delay time.Duration) (*SlowProxy, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	p := &SlowProxy{Addr: l.Addr().String(), conns: map[net.Conn]bool{}, l: l}
	p.delay.Store(int64(delay))
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed
			}
			p.wg.Go(func() { p.serve(c, upstream) })
		}
	})
	return p, nil
}

// SetDelay changes the delay of every chunk from now on (0: none).
func (p *SlowProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Close stops the proxy and cuts its connections.
func (p *SlowProxy) Close() {
	_ = p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *SlowProxy) track(c net.Conn, open bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if open {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

func (p *SlowProxy) serve(c net.Conn, upstream string) {
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		_ = c.Close()
		return
	}
	for _, x := range []net.Conn{c, u} {
		p.track(x, true)
		defer func() { p.track(x, false); _ = x.Close() }()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(u, c) // requests go through at once
		_ = u.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := u.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d)
			}
			p.sent.Add(int64(n))
			if _, werr := c.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = c.Close()
	<-done
}
