// Command latencyproxy puts an S3-compatible store (MinIO on loopback)
// behind internal/testenv/latencyproxy, so that a benchmark outside Go (the
// Python loader benchmarks, hack/bench) sees a real store's time to first
// byte and request-rate limit, and learns how many requests of each kind it
// made.
//
//	go run ./hack/latencyproxy --upstream 127.0.0.1:9000 --delay 30ms --rate 3500
//
// It prints one line of JSON, {"addr": "127.0.0.1:PORT", "url":
// "http://127.0.0.1:PORT"}, once it listens; point the client's endpoint at
// the url, with the store's own credentials (signatures pass unchanged). On
// SIGINT or SIGTERM it prints the counts as a second line of JSON and exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/shardfeed/shardfeed/internal/testenv/latencyproxy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "latencyproxy:", err)
		os.Exit(2)
	}
}

// run serves until ctx is done, printing the address and then the counts.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("latencyproxy", flag.ContinueOnError)
	var o latencyproxy.Options
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (port 0: a free one)")
	fs.StringVar(&o.Upstream, "upstream", "", "the store's host:port, plain HTTP (required)")
	fs.DurationVar(&o.Delay, "delay", 0, "added to each request before it reaches the store (a cloud store's time to first byte: 20ms–50ms)")
	fs.DurationVar(&o.Jitter, "jitter", 0, "a uniform extra delay in [0, jitter) per request")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the jitter's generator")
	fs.Float64Var(&o.Rate, "rate", 0, "requests a second let through (0: no limit; S3 allows 5500 GETs a second per prefix)")
	fs.IntVar(&o.Burst, "burst", 0, "requests let through at once above the rate (default: a second's worth, at least 1)")
	slowDown := fs.Bool("slowdown", false, "answer requests over the rate 503 SlowDown, as S3 does, instead of holding them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.Upstream == "" {
		return fmt.Errorf("--upstream is required: the store's host:port, e.g. 127.0.0.1:9000")
	}
	if *slowDown {
		o.Throttle = latencyproxy.SlowDown
	}
	if o.Burst == 0 {
		o.Burst = max(int(o.Rate), 1)
	}
	p, err := latencyproxy.New(*listen, o)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	if err := enc.Encode(map[string]string{"addr": p.Addr, "url": p.URL()}); err != nil {
		_ = p.Close()
		return err
	}
	if f, ok := out.(*os.File); ok {
		_ = f.Sync()
	}
	<-ctx.Done()
	closeErr := p.Close()
	if err := enc.Encode(p.Counts()); err != nil {
		return err
	}
	return closeErr
}
