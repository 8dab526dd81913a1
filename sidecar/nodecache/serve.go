package nodecache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Listen opens the agent's socket at path, replacing a stale one. Any
// user of the node may connect: each request's token says who asks.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("node agent: socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("node agent: removing a stale socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("node agent: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("node agent: %w", err)
	}
	return l, nil
}

// Serve answers requests on l until ctx ends, then lets the answers in
// flight finish for up to 10 seconds; it runs the warm fills meanwhile.
func (a *Agent) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	a.warmFills(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
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
