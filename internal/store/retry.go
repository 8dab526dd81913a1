package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Do runs fn until it succeeds, fails for good, or MaxElapsed passes,
// sleeping with exponential backoff and full jitter between attempts. Each
// attempt gets a context bounded by RequestTimeout; fn must call cancel
// when it no longer needs that context (it may hand it on, e.g. to a body
// that is read later).
func (r Retry) Do(ctx context.Context, fn func(ctx context.Context, cancel context.CancelFunc) error) error {
	r = r.WithDefaults()
	start := time.Now()
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeoutCause(ctx, r.RequestTimeout,
			fmt.Errorf("%w: no complete answer within %s (the per-request timeout)", context.DeadlineExceeded, r.RequestTimeout))
		err := fn(actx, cancel)
		if err == nil {
			return nil
		}
		if errors.Is(context.Cause(actx), context.DeadlineExceeded) && ctx.Err() == nil && !errors.Is(err, context.Cause(actx)) {
			err = fmt.Errorf("%w (%w)", err, context.Cause(actx))
		}
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		}
		if !Retryable(err) {
			return err
		}
		if time.Since(start) >= r.MaxElapsed {
			return fmt.Errorf("%w (gave up after %d attempts in %s)", err, attempt+1, time.Since(start).Round(time.Millisecond))
		}
		backoff := min(r.MaxDelay, r.BaseDelay<<min(attempt, 30))
		sleep := time.Duration(rand.Int64N(int64(backoff) + 1)) // full jitter
		if r.OnRetry != nil {
			r.OnRetry(err, attempt+1, sleep)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		case <-time.After(sleep):
		}
	}
}

// Retryable says whether an error is worth another attempt: a 5xx or 429
// response, a timeout, a refused or reset connection, a body cut short.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, ErrNotFound) {
		return false
	}
	// A host or address the policy refuses is refused on every attempt.
	var refused *HostError
	if errors.As(err, &refused) {
		return false
	}
	// A name that does not resolve will not resolve on the next attempt.
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status >= 500 || se.Status == http.StatusTooManyRequests || se.Code == "SlowDown" || se.Code == "RequestTimeout"
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}

// StatusError is a response a store refused with: its HTTP status and the
// store's error code, for Retryable. Err says what failed (bucket, key,
// status, code, what to do), never the response's body.
type StatusError struct {
	Err    error
	Status int
	Code   string
}

func (e *StatusError) Error() string { return e.Err.Error() }
func (e *StatusError) Unwrap() error { return e.Err }

// Stat is a store's Stat: the key checked, then stat retried, each attempt
// under its own timeout. stat returns the object's description or its
// store's described error.
func (r Retry) Stat(ctx context.Context, key string, stat func(ctx context.Context) (Object, error)) (Object, error) {
	if err := CheckKey(key); err != nil {
		return Object{}, err
	}
	var out Object
	err := r.Do(ctx, func(ctx context.Context, cancel context.CancelFunc) error {
		defer cancel()
		var err error
		out, err = stat(ctx)
		return err
	})
	return out, err
}

// ListDir is a store's ListDir: dir checked, then list retried as a
// whole, each attempt under its own timeout, both lists sorted. list
// returns one level under the store's prefix + dir.
func (r Retry) ListDir(ctx context.Context, dir string, list func(ctx context.Context) (Listing, error)) (Listing, error) {
	if err := CheckDir(dir); err != nil {
		return Listing{}, err
	}
	var out Listing
	err := r.Do(ctx, func(ctx context.Context, cancel context.CancelFunc) error {
		defer cancel()
		var err error
		out, err = list(ctx)
		return err
	})
	if err != nil {
		return Listing{}, err
	}
	slices.Sort(out.Dirs)
	slices.SortFunc(out.Objects, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// List is a store's List: list retried as a whole (a listing cut midway
// starts again), each attempt under its own timeout, sorted by key. list
// appends every object under the prefix to its argument.
func (r Retry) List(ctx context.Context, list func(ctx context.Context, out []Object) ([]Object, error)) ([]Object, error) {
	var out []Object
	err := r.Do(ctx, func(ctx context.Context, cancel context.CancelFunc) error {
		defer cancel()
		var err error
		out, err = list(ctx, out[:0])
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}
