package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// AnyHost in a policy's Listed allows every host name (never a private,
// loopback or metadata address it resolves to).
const AnyHost = "*"

// Endpoints is the platform team's policy on where a stream's requests may
// go: the hosts it lists, for any use, and the clouds' own hosts, each for
// the use and the account its cloud runs it for. The manager, the sidecar
// and the node agent check every request of a store against it, and every
// address a request connects to.
type Endpoints struct {
	// Listed are the platform team's entries: "host", "host:port",
	// "*.example.com" (any subdomain), an IP address or a CIDR
	// ("10.1.0.0/16"), "*" any host. A listed name may resolve to a
	// private or loopback address; a metadata or link-local address is
	// reached only where its IP (or a CIDR holding it) is listed.
	Listed []string
	// Cloud are the clouds' own hosts (every store's CloudHosts): allowed
	// beside Listed where CloudAllowed, each for its cloud, use and
	// account; refused to any other cloud, use or account even where
	// Listed holds "*". Domains are the domains those clouds own, where
	// plain HTTP is never allowed.
	Cloud        []CloudHost
	CloudAllowed bool
	Domains      []string
	// LookupNetIP resolves a host's addresses (default
	// net.DefaultResolver's) and Dial connects to an address the policy
	// allowed (default a net.Dialer's): tests stand a loopback listener in
	// for a cloud's host with them.
	LookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
	Dial        func(ctx context.Context, network, address string) (net.Conn, error)
	// Proxy picks a request's egress proxy (default the environment's,
	// HTTPS_PROXY and the like, as http.DefaultTransport does).
	Proxy func(*http.Request) (*url.URL, error)

	once      sync.Once
	transport *http.Transport
	proxies   sync.Map // the operator's own proxies' host:port, dialled unchecked
}

// reach says which addresses a host that passed a Gate may connect to.
type reach uint8

const (
	reachPublic  reach = iota + 1 // "*": public addresses only
	reachPrivate                  // a cloud's own host: a VPC endpoint's private address too
	reachListed                   // a host the platform listed by name: loopback too
)

// Gate is what a policy allows one kind of request: a store of Cloud's
// (its hosts per CloudHost), for a use, and, for a storage account's
// credential, that account's hosts only. A nil Gate allows everything.
type Gate struct {
	policy  *Endpoints
	cloud   string
	use     Use
	account string
	// partition binds an account's credential to one partition of its
	// cloud: an account's name is unique within one only.
	partition string
}

// Gate returns the gate of requests of use u to cloud's hosts; account,
// where not "", binds a storage credential to that account's hosts. Nil
// for a nil policy (no checks: the CLI on a user's own machine, tests).
func (e *Endpoints) Gate(cloud string, u Use, account string) *Gate {
	if e == nil {
		return nil
	}
	g := &Gate{policy: e, cloud: cloud, use: u, account: strings.ToLower(account)}
	if g.account != "" {
		// The cloud's first partition (its public cloud), unless InPartition.
		if i := slices.IndexFunc(e.Cloud, func(h CloudHost) bool { return h.Cloud == cloud }); i >= 0 {
			g.partition = e.Cloud[i].Partition
		}
	}
	return g
}

// InPartition binds the gate's account to another partition of its cloud
// (one a connection string's EndpointSuffix names).
func (g *Gate) InPartition(partition string) *Gate {
	if g == nil {
		return nil
	}
	c := *g
	c.partition = partition
	return &c
}

// HostError is a host a policy refuses, with the value a platform team
// would add to allow it.
type HostError struct {
	Host string
	// Why says what the host is and why the request may not go there.
	Why string
}

func (e *HostError) Error() string { return e.Why }

// Check refuses a request to hostport (as a URL names it) over scheme
// ("http" or "https") that the gate does not allow, saying why and what
// would allow it.
func (g *Gate) Check(scheme, hostport string) error {
	_, err := g.check(scheme, hostport)
	return err
}

func (g *Gate) check(scheme, hostport string) (reach, error) {
	if g == nil {
		return reachListed, nil
	}
	e := g.policy
	if strings.Contains(hostport, "..") {
		return 0, &HostError{Host: hostport, Why: fmt.Sprintf("%q is not a host name (an empty label)", hostport)}
	}
	hostport = strings.ToLower(strings.TrimSuffix(hostport, "."))
	host, port := hostport, ""
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.HasSuffix(host, ".") {
		return 0, &HostError{Host: hostport, Why: fmt.Sprintf("%q is not a host name (an empty label)", hostport)}
	}
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	refuse := func(format string, a ...any) (reach, error) {
		return 0, &HostError{Host: hostport, Why: fmt.Sprintf(format, a...)}
	}
	if metadataNames[host] {
		return refuse("%q is a cloud's metadata service, which shardfeed never reaches", hostport)
	}
	if scheme == "http" {
		if d := e.cloudDomain(host); d != "" {
			return refuse("%q is refused over plain HTTP: it is under %s, a cloud's domain, where HTTP would carry the stream's credentials in the clear to whoever answers (drop source.insecure and use https)", hostport, d)
		}
	}
	addr, err := netip.ParseAddr(host)
	switch {
	case err == nil && e.addressListed(addr, port):
		return reachListed, nil
	case err == nil && classify(addr) != classPublic:
		return refuse("%q is %s, which shardfeed reaches only where the platform team lists that address in datasets.allowedEndpoints (a link-local or metadata address never otherwise)", hostport, classNames[classify(addr)])
	case err != nil && numericName.MatchString(host):
		// 2852039166 or 0xa9.0xfe.0xa9.0xfe: an address in a form a
		// resolver or proxy may read as one, which no host name has.
		return refuse("%q is neither a host name nor an IP address in standard form", hostport)
	}
	if e.nameListed(hostport, host) {
		return reachListed, nil
	}
	var other *CloudHost
	own := false
	for i, h := range e.Cloud {
		account, ok := h.Match(host)
		if !ok {
			continue
		}
		if h.Cloud == g.cloud && h.Use == g.use && (g.account == "" || account == "" || account == g.account && h.Partition == g.partition) {
			if port != "443" {
				return refuse("%q: the clouds' own hosts are reached over HTTPS on port 443 only", hostport)
			}
			if e.CloudAllowed {
				return reachPrivate, nil
			}
			own = true
			continue
		}
		if other == nil {
			other = &e.Cloud[i]
		}
	}
	if own {
		other = nil // the host is the gate's own cloud's, for its use
	}
	// A cloud's own host is refused to another cloud's credential, use or
	// account, "*" or not: "*" is for hosts of no cloud.
	anyHost := slices.Contains(e.Listed, AnyHost)
	switch {
	case other != nil && other.Cloud != g.cloud:
		return refuse("%q is %s's %s host (%s), and this request carries a credential of %s's: each cloud's credentials go to that cloud's hosts only", hostport, other.Cloud, other.Use, other.Partition, g.cloud)
	case other != nil && other.Use != g.use:
		return refuse("%q is %s's %s host, and this request is for its %s: a credential goes only to the hosts of its own use", hostport, other.Cloud, other.Use, g.use)
	case other != nil && other.Partition != g.partition:
		return refuse("%q is a storage host of %s, and the stream's account is one of %s (an account's name is unique within its cloud only): name a connection string with the account's EndpointSuffix, or ask the platform team to list the host", hostport, other.Partition, g.partition)
	case other != nil:
		return refuse("%q is the storage host of another account than %s: a storage account's credentials go to that account's hosts only", hostport, g.account)
	case anyHost && g.use == UseToken:
		// A token is a credential at the cloud's own token service,
		// wherever it was sent first.
		return refuse("%q: a token exchange goes only to a cloud's token service or a host the platform team lists by name (\"*\" does not allow it): add %q to datasets.allowedEndpoints if it is your own token service", hostport, hostport)
	case anyHost && e.cloudDomain(host) != "" && !own:
		return refuse("%q is under %s, a cloud's domain, but is none of the hosts it runs for this stream's credentials (\"*\" allows hosts of no cloud): list it by name if it is one you run", hostport, e.cloudDomain(host))
	case anyHost:
		return reachPublic, nil
	}
	why := fmt.Sprintf("%q is not one the platform team allows (the chart's datasets.allowedEndpoints: %s)", hostport, e.describe())
	if d := e.cloudDomain(host); d != "" {
		why += fmt.Sprintf("; it is under %s but is none of the hosts the cloud runs for its storage and token services (its customers run API gateways, instances, load balancers and websites under the same domain)", d)
	}
	return refuse("%s: if it is a store the platform runs, add %q to datasets.allowedEndpoints", why, hostport)
}

// numericName is a name whose last label is a number: an IPv4 address in
// a non-standard form (decimal, octal, hexadecimal), never a host name.
var numericName = regexp.MustCompile(`(^|\.)(0x[0-9a-f]*|[0-9]+)$`)

// describe lists the policy for messages.
func (e *Endpoints) describe() string {
	parts := slices.Clone(e.Listed)
	if e.CloudAllowed {
		parts = append(parts, "the clouds' own storage and token hosts (datasets.allowCloudEndpoints)")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// cloudDomain returns the cloud domain host is under, or "".
func (e *Endpoints) cloudDomain(host string) string {
	for _, d := range e.Domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return d
		}
	}
	return ""
}

// nameListed matches host[:port] against the listed names ("*" aside):
// "host", "host:port", "*.domain"; an entry without a port allows every
// port.
func (e *Endpoints) nameListed(hostport, host string) bool {
	for _, entry := range e.Listed {
		entry = strings.ToLower(strings.TrimSpace(entry))
		switch {
		case entry == AnyHost || entry == "":
		case entry == hostport || entry == host:
			return true
		case strings.HasPrefix(entry, "*.") && strings.HasSuffix(host, entry[1:]) && len(host) > len(entry)-1:
			return true
		}
	}
	return false
}

// addressListed says whether an IP or CIDR entry holds addr on port
// ("": any port); an entry with a port allows that port only.
func (e *Endpoints) addressListed(addr netip.Addr, port string) bool {
	addr = addr.Unmap().WithZone("")
	for _, entry := range e.Listed {
		entry = strings.TrimSpace(entry)
		entryPort := ""
		if h, p, err := net.SplitHostPort(entry); err == nil {
			entry, entryPort = h, p
		}
		if entryPort != "" && port != "" && entryPort != port {
			continue
		}
		if a, err := netip.ParseAddr(strings.Trim(entry, "[]")); err == nil && a.Unmap() == addr {
			return true
		}
		if p, err := netip.ParsePrefix(entry); err == nil && p.Contains(addr) {
			return true
		}
	}
	return false
}

// metadataNames are the clouds' metadata services by name: never reached.
var metadataNames = map[string]bool{
	"metadata.google.internal": true, "metadata.goog": true, "metadata": true,
	"instance-data": true, "instance-data.ec2.internal": true, "metadata.azure.internal": true,
}

type addrClass uint8

const (
	classPublic addrClass = iota
	classPrivate
	classLoopback
	classLinkLocal
	classMetadata
	classUnusable
)

var (
	// AWS's instance metadata, DNS and time over IPv6 (fd00:ec2::254 …),
	// Google's over IPv6, Alibaba's and Oracle's metadata, and Azure's
	// WireServer (a public address).
	metadataPrefixes = []netip.Prefix{netip.MustParsePrefix("fd00:ec2::/32"), netip.MustParsePrefix("fd20:ce::254/128"),
		netip.MustParsePrefix("100.100.100.200/32"), netip.MustParsePrefix("168.63.129.16/32"), netip.MustParsePrefix("192.0.0.192/32")}
	// Forms no store is reached at: IPv6 site-local (deprecated),
	// IPv4-compatible IPv6, NAT64's local-use prefix (whose IPv4 address
	// sits elsewhere in it).
	unusablePrefixes = []netip.Prefix{netip.MustParsePrefix("fec0::/10"), netip.MustParsePrefix("::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}
	sharedSpace      = netip.MustParsePrefix("100.64.0.0/10") // carrier-grade NAT, some clusters' pods
	nat64            = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour        = netip.MustParsePrefix("2002::/16")
	thisNetwork      = netip.MustParsePrefix("0.0.0.0/8")
	reserved         = netip.MustParsePrefix("240.0.0.0/4")
)

func classify(a netip.Addr) addrClass {
	if a.Zone() != "" {
		// A zone is ignored by the kernel for any but a link-local
		// address, and hides the address from prefix checks.
		if a.WithZone("").IsLinkLocalUnicast() {
			return classLinkLocal
		}
		return classUnusable
	}
	a = a.Unmap()
	switch b := a.As16(); {
	case nat64.Contains(a): // the IPv4 address behind a NAT64 prefix
		a = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	case sixToFour.Contains(a): // 6to4: the IPv4 address after 2002::/16
		a = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
	}
	for _, p := range metadataPrefixes {
		if p.Contains(a) {
			return classMetadata
		}
	}
	switch {
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return classLinkLocal
	case a.IsLoopback():
		return classLoopback
	case slices.ContainsFunc(unusablePrefixes, func(p netip.Prefix) bool { return p.Contains(a) }):
		return classUnusable
	case a.IsUnspecified() || a.IsMulticast() || thisNetwork.Contains(a) || reserved.Contains(a) || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return classUnusable
	case a.IsPrivate() || sharedSpace.Contains(a):
		return classPrivate
	}
	return classPublic
}

var classNames = map[addrClass]string{classPrivate: "a private address", classLoopback: "a loopback address",
	classLinkLocal: "a link-local address (a node's metadata service)", classMetadata: "a cloud's metadata service", classUnusable: "no address a store is reached at", classPublic: "a public address"}

// addressAllowed refuses an address a host that passed with r may not
// connect to.
func (e *Endpoints) addressAllowed(host, port string, a netip.Addr, r reach) error {
	if e.addressListed(a, port) {
		return nil
	}
	c := classify(a)
	ok := c == classPublic || c == classPrivate && r >= reachPrivate || c == classLoopback && r >= reachListed
	if ok {
		return nil
	}
	return &HostError{Host: host, Why: fmt.Sprintf("%s resolves to %s, %s, which shardfeed does not connect to unless the platform team lists that address (datasets.allowedEndpoints, e.g. %q)",
		host, a, classNames[c], a.String())}
}

type reachKey struct{}

// transportOf returns the policy's transport: the shared one's settings,
// with every connection's address checked.
func (e *Endpoints) transportOf() *http.Transport {
	e.once.Do(func() {
		t := baseTransport().Clone()
		proxy := t.Proxy
		if e.Proxy != nil {
			proxy = e.Proxy
		}
		t.Proxy = func(req *http.Request) (*url.URL, error) {
			if proxy == nil {
				return nil, nil
			}
			u, err := proxy(req)
			if u == nil || err != nil {
				return u, err
			}
			// The proxy resolves the name and connects wherever it
			// points: only names the clouds or the platform control go
			// through it, never one allowed by "*" alone.
			if r, _ := req.Context().Value(reachKey{}).(reach); r < reachPrivate {
				return nil, &HostError{Host: req.URL.Host, Why: fmt.Sprintf("%s is allowed only by \"*\", and the egress proxy (HTTPS_PROXY) would resolve it unchecked: the platform team lists it by name or address in datasets.allowedEndpoints", req.URL.Host)}
			}
			e.proxies.Store(canonicalAddr(u), true)
			return u, nil
		}
		t.DialContext = e.dialContext
		e.transport = t
	})
	return e.transport
}

func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443", "socks5": "1080"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// dialContext connects to a host's first address the policy allows: the
// names were checked per request (Gate), the addresses they resolve to are
// checked here, where nothing can change them between check and use.
func (e *Endpoints) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	dial := e.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if _, ok := e.proxies.Load(strings.ToLower(address)); ok {
		return dial(ctx, network, address) // the operator's own proxy resolves the store's name
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	r, _ := ctx.Value(reachKey{}).(reach)
	if r == 0 {
		r = reachPublic
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lookup := e.LookupNetIP
		if lookup == nil {
			lookup = net.DefaultResolver.LookupNetIP
		}
		if addrs, err = lookup(ctx, "ip", host); err != nil {
			return nil, err
		}
	}
	var errs []error
	for _, a := range addrs {
		if err := e.addressAllowed(host, port, a, r); err != nil {
			errs = append(errs, err)
			continue
		}
		conn, err := dial(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%s resolves to no address", host)
	}
	return nil, errors.Join(errs...)
}
