package store

import (
	"net"
	"strings"
)

// HostAllowed matches host[:port] against an allow-list of "host",
// "host:port" and "*.example.com" (any subdomain); an entry without a port
// allows every port of its host. Matching ignores case. The operator
// checks a dataset's endpoints with it, and the node agent each request's.
func HostAllowed(allowed []string, hostport string) bool {
	hostport = strings.ToLower(hostport)
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	for _, e := range allowed {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "*" || e == hostport || e == host:
			return true
		case strings.HasPrefix(e, "*.") && strings.HasSuffix(host, e[1:]) && len(host) > len(e)-1:
			return true
		}
	}
	return false
}

// CloudEndpoints are the hosts of the clouds' own stores and token
// exchanges: what the manager (--allow-cloud-endpoints) and the node agent
// allow by default beside the platform's own endpoints.
var CloudEndpoints = []string{
	"*.amazonaws.com",                                 // S3, regional STS, Glue
	"storage.googleapis.com", "oauth2.googleapis.com", // GCS and a key's token exchange
	"sts.googleapis.com", "iamcredentials.googleapis.com", // GCS workload identity
	"*.blob.core.windows.net", "*.dfs.core.windows.net", "login.microsoftonline.com", // Azure
}
