package store

import (
	"fmt"
	"regexp"
	"strings"
)

// Use is what a request carries to its host, and so which of a cloud's
// hosts may receive it.
type Use uint8

const (
	// UseStorage is a store's own requests: signed with its keys, or
	// carrying its SAS token or bearer token.
	UseStorage Use = iota + 1
	// UseToken is a workload identity's token exchange: the ServiceAccount
	// token (or a key's signed assertion) goes to the cloud's token service.
	UseToken
	// UseCatalog is a table catalog's requests (AWS Glue).
	UseCatalog
)

func (u Use) String() string {
	switch u {
	case UseStorage:
		return "storage"
	case UseToken:
		return "token service"
	case UseCatalog:
		return "catalog"
	}
	return "unknown use"
}

// CloudHost is one form of host name a cloud operates itself, for one
// use, as the cloud documents it. A pattern is DNS labels with
// placeholders: {bucket} (labels of a bucket's name), {label} (one label),
// {account} (an Azure storage account), {region} and {domain} (filled per
// partition by ExpandHosts), {az} (an availability zone ID, S3 Express),
// {vpce} (a VPC endpoint's label). Names a cloud's customers operate under
// the same domain (API Gateway, EC2, load balancers, static websites) must
// match no row.
type CloudHost struct {
	// Cloud is the store's cloud ("aws", "azure", "google"): a credential
	// of one cloud goes to that cloud's hosts only.
	Cloud string
	// Partition is the cloud's partition or sovereign cloud ("aws-cn").
	Partition string
	Use       Use
	Pattern   string
	re        *regexp.Regexp
}

// Partition is where a pattern's {region} and {domain} are filled: a
// cloud's partition, its regions' form and its domain.
type Partition struct {
	Name string
	// Region is a regular expression of the partition's region names.
	Region string
	// Domain is the partition's DNS domain ("amazonaws.com.cn").
	Domain string
}

// placeholders are the regular expressions of a pattern's placeholders.
var placeholders = map[string]string{
	"{bucket}":  `[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]`,
	"{label}":   `[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?`,
	"{account}": `(?P<account>[a-z0-9]{3,24})`,
	"{az}":      `[a-z0-9]{2,8}-az[0-9]{1,2}`,
	"{vpce}":    `vpce-[a-z0-9-]{1,58}`,
}

var placeholder = regexp.MustCompile(`\{[a-z]+\}`)

// ExpandHosts turns patterns into a table of one cloud's hosts: each
// pattern that names {region} or {domain} once per partition.
func ExpandHosts(cloud string, partitions []Partition, rows []CloudHost) []CloudHost {
	var out []CloudHost
	for _, r := range rows {
		r.Cloud = cloud
		if !strings.Contains(r.Pattern, "{region}") && !strings.Contains(r.Pattern, "{domain}") {
			if r.Partition == "" {
				r.Partition = partitions[0].Name
			}
			out = append(out, compileHost(r, Partition{}))
			continue
		}
		for _, p := range partitions {
			if r.Partition != "" && r.Partition != p.Name {
				continue
			}
			e := r
			e.Partition = p.Name
			out = append(out, compileHost(e, p))
		}
	}
	return out
}

func compileHost(h CloudHost, p Partition) CloudHost {
	var expr strings.Builder
	last := 0
	for _, at := range placeholder.FindAllStringIndex(h.Pattern, -1) {
		expr.WriteString(regexp.QuoteMeta(h.Pattern[last:at[0]]))
		switch ph := h.Pattern[at[0]:at[1]]; ph {
		case "{region}":
			expr.WriteString("(?:" + p.Region + ")")
		case "{domain}":
			expr.WriteString(regexp.QuoteMeta(p.Domain))
		default:
			re, ok := placeholders[ph]
			if !ok {
				panic(fmt.Sprintf("cloud host pattern %q: unknown placeholder %s", h.Pattern, ph))
			}
			expr.WriteString(re)
		}
		last = at[1]
	}
	expr.WriteString(regexp.QuoteMeta(h.Pattern[last:]))
	h.re = regexp.MustCompile(`^` + expr.String() + `$`)
	h.Pattern = strings.NewReplacer("{region}", "<"+p.Name+" region>", "{domain}", p.Domain).Replace(h.Pattern)
	return h
}

// Match reports whether host (lower-case, no port) has the row's form,
// and the storage account it names ("" where it names none).
func (h CloudHost) Match(host string) (account string, ok bool) {
	m := h.re.FindStringSubmatch(host)
	if m == nil {
		return "", false
	}
	if i := h.re.SubexpIndex("account"); i > 0 {
		account = m[i]
	}
	return account, true
}
