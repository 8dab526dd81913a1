package nodecache

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Listen opens the agent's TCP port at addr (the node-local Service's
// target). Any pod may connect; the agent proves who it is with its
// certificate, and each request's token says who asks.
func Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	return l, nil
}

// Certificate is the agent's serving certificate in two files (a mounted
// TLS Secret the operator renews), read again when they change.
type Certificate struct {
	CertFile, KeyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
	checked time.Time
}

// certCheck is how often the files are looked at again.
const certCheck = 10 * time.Second

// Load reads the pair now: a missing or broken one is an error at start.
func (c *Certificate) Load() error {
	_, err := c.get()
	return err
}

func (c *Certificate) get() (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && time.Since(c.checked) < certCheck {
		return c.cert, nil
	}
	c.checked = time.Now()
	st, err := os.Stat(c.CertFile)
	if err == nil && c.cert != nil && st.ModTime().Equal(c.modTime) {
		return c.cert, nil
	}
	pair, perr := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if perr != nil {
		if c.cert != nil {
			return c.cert, nil // a Secret mid-update: the last good pair
		}
		return nil, fmt.Errorf("node agent: its certificate (%s, %s): %w", c.CertFile, c.KeyFile, perr)
	}
	c.cert = &pair
	if err == nil {
		c.modTime = st.ModTime()
	}
	return c.cert, nil
}

// TLSConfig serves the certificate, TLS 1.2 at least, HTTP/1.1.
func (c *Certificate) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.get()
		},
	}
}

// Serve answers requests over TLS with cert on l until ctx ends, then
// lets the answers in flight finish for up to 10 seconds; it runs the
// warm fills meanwhile.
func (a *Agent) Serve(ctx context.Context, l net.Listener, cert *Certificate) error {
	if err := cert.Load(); err != nil {
		return err
	}
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute,
		TLSConfig: cert.TLSConfig()}
	fillCtx, stopFills := context.WithCancel(ctx)
	fillsDone := a.warmFills(fillCtx)
	defer fillsDone() // no fill writes to the cache once Serve returns
	defer stopFills() // (deferred calls run last first: stop, then wait)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(tls.NewListener(l, srv.TLSConfig)) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
