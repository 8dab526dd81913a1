package azure

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/shardfeed/shardfeed/internal/store"
)

// Cloud is the name of Azure's hosts in a policy (store.CloudHost.Cloud).
const Cloud = "azure"

// partitions are Azure's public cloud and its sovereign clouds: each
// one's storage suffix.
var partitions = []store.Partition{
	{Name: "azure", Domain: "core.windows.net"},
	{Name: "azure-china", Domain: "core.chinacloudapi.cn"},
	{Name: "azure-us-gov", Domain: "core.usgovcloudapi.net"},
}

// CloudDomains are the domains Microsoft owns for storage and Entra:
// plain HTTP is refused under them.
var CloudDomains = []string{"windows.net", "chinacloudapi.cn", "usgovcloudapi.net", "microsoftonline.com", "microsoftonline.us", "storage.azure.net"}

// CloudHosts are the hosts Azure operates for Blob Storage (an account's
// blob and dfs endpoints and its read-access secondary) and Microsoft
// Entra's token service, in the public cloud, Azure China and Azure
// Government. A storage host names its account: a key, SAS token or
// connection string goes to its own account's hosts only, in the public
// cloud unless a connection string's EndpointSuffix names another (an
// account's name is unique within one cloud only). Static websites
// (web.core.windows.net), App Service and the other hosts customers run
// under the same domains match no row, nor do the DNS-zone endpoints of
// storage.azure.net, where an account's name is unique within its zone
// only.
var CloudHosts = store.ExpandHosts(Cloud, partitions, []store.CloudHost{
	{Use: store.UseStorage, Pattern: "{account}.blob.{domain}"},
	{Use: store.UseStorage, Pattern: "{account}.dfs.{domain}"},
	{Use: store.UseStorage, Pattern: "{account}-secondary.blob.{domain}"},
	{Use: store.UseToken, Pattern: "login.microsoftonline.com", Partition: "azure"},
	{Use: store.UseToken, Pattern: "login.chinacloudapi.cn", Partition: "azure-china"},
	{Use: store.UseToken, Pattern: "login.microsoftonline.us", Partition: "azure-us-gov"},
})

// Account is the storage account of an az:// or abfss:// URI.
func Account(u *url.URL) string {
	if u.Scheme == SchemeABFSS {
		account, _, _ := strings.Cut(u.Hostname(), ".")
		return strings.ToLower(account)
	}
	return strings.ToLower(u.Host)
}

// AudienceAllowed is whether a workload identity's audience is Entra's.
func AudienceAllowed(audience string) bool { return audience == Audience }

// connectionString is what shardfeed reads of an Azure Storage connection
// string: the account, and the blob endpoint its requests go to.
type connectionString struct {
	account  string
	endpoint *url.URL
}

// parseConnectionString reads "Key=Value;…" as Azure's SDKs do: the blob
// endpoint is BlobEndpoint, else DefaultEndpointsProtocol://AccountName.
// blob.EndpointSuffix. Values are never put in errors: a connection
// string holds the key.
func parseConnectionString(s string) (connectionString, error) {
	fields := map[string]string{}
	for _, part := range strings.Split(strings.TrimSpace(s), ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return connectionString{}, fmt.Errorf("credentials: %s is not a connection string (Key=Value;…)", ConnectionStringFile)
		}
		fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	cs := connectionString{account: strings.ToLower(fields["accountname"])}
	raw := fields["blobendpoint"]
	if raw == "" {
		if cs.account == "" {
			return connectionString{}, fmt.Errorf("credentials: %s names neither BlobEndpoint nor AccountName", ConnectionStringFile)
		}
		protocol, suffix := strings.ToLower(fields["defaultendpointsprotocol"]), fields["endpointsuffix"]
		if protocol == "" {
			protocol = "https"
		}
		if suffix == "" {
			suffix = "core.windows.net"
		}
		raw = protocol + "://" + cs.account + ".blob." + suffix
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return connectionString{}, fmt.Errorf("credentials: the blob endpoint of %s is not an http(s) URL of a host", ConnectionStringFile)
	}
	cs.endpoint = u
	return cs, nil
}

// checkConnectionString refuses a connection string whose endpoint the
// policy does not allow for the URI's account, or that names another
// account than the URI, or plain HTTP without source.insecure: its
// endpoint is checked like every other, before any request. It returns
// the partition of Azure's its endpoint is in ("": none of Azure's).
func checkConnectionString(src store.Source, account, raw string) (string, error) {
	cs, err := parseConnectionString(raw)
	if err != nil {
		return "", err
	}
	if cs.account != "" && cs.account != account {
		return "", fmt.Errorf("credentials: %s names the account %q, and the stream's URI the account %q: name the same account in both", ConnectionStringFile, cs.account, account)
	}
	if cs.endpoint.Scheme == "http" && !src.Insecure {
		return "", fmt.Errorf("credentials: %s names a plain-HTTP blob endpoint (%s): set insecure: true on the stream's source to allow it", ConnectionStringFile, cs.endpoint.Host)
	}
	partition := ""
	for _, h := range CloudHosts {
		if _, ok := h.Match(strings.ToLower(cs.endpoint.Hostname())); ok {
			partition = h.Partition
			break
		}
	}
	if err := src.Endpoints.Gate(Cloud, store.UseStorage, account).InPartition(partition).Check(cs.endpoint.Scheme, cs.endpoint.Host); err != nil {
		return "", fmt.Errorf("credentials: the blob endpoint of %s: %w", ConnectionStringFile, err)
	}
	return partition, nil
}
