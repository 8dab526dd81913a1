// Package budget bounds what each source address may cost, and all of
// them together: token reviews, each a request to the API server, which
// an endpoint must not let one client spend for everyone.
package budget

import (
	"net"
	"sync"

	"golang.org/x/time/rate"
)

// PerSource allows each source perSecond (burst at once), and, when
// given a total, all of them that. It remembers at most max sources.
type PerSource struct {
	rate  rate.Limit
	burst int
	max   int
	all   *rate.Limiter // nil: no total

	mu      sync.Mutex
	sources map[string]*rate.Limiter
}

// New allows each source perSecond, burst at once, remembering at most
// maxSources of them.
func New(perSecond float64, burst, maxSources int) *PerSource {
	return &PerSource{rate: rate.Limit(perSecond), burst: burst, max: maxSources, sources: map[string]*rate.Limiter{}}
}

// WithTotal bounds all sources together too.
func (b *PerSource) WithTotal(perSecond float64, burst int) *PerSource {
	b.all = rate.NewLimiter(rate.Limit(perSecond), burst)
	return b
}

// Allow takes one from the budget of the source of remoteAddr (its host,
// without the port) and from the total.
func (b *PerSource) Allow(remoteAddr string) bool {
	src := Source(remoteAddr)
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.sources[src]
	if l == nil {
		if len(b.sources) >= b.max {
			// Full: forget the sources whose budget is whole again (a new
			// one would be the same), then any, so the table stays bounded.
			for k, v := range b.sources {
				if v.Tokens() >= float64(b.burst) || len(b.sources) >= b.max {
					delete(b.sources, k)
				}
			}
		}
		l = rate.NewLimiter(b.rate, b.burst)
		b.sources[src] = l
	}
	if !l.Allow() {
		return false
	}
	return b.all == nil || b.all.Allow()
}

// Source is the address a request came from, without its port.
func Source(remoteAddr string) string {
	if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
		return host
	}
	return remoteAddr
}
