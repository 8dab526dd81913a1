package s3

import (
	"fmt"
	"net/url"
	"regexp"

	"github.com/shardfeed/shardfeed/internal/store"
)

// Partitions are the AWS partitions a source reaches without an endpoint:
// its region selects one (cn-north-1 is aws-cn, under amazonaws.com.cn).
var Partitions = []store.Partition{
	{Name: "aws-cn", Region: `cn-[a-z]+-[0-9]{1,2}`, Domain: "amazonaws.com.cn"},
	{Name: "aws-us-gov", Region: `us-gov-[a-z]+-[0-9]{1,2}`, Domain: "amazonaws.com"},
	{Name: "aws", Region: `(?:[abd-z][a-z]|c[a-mo-z])-[a-z]+-[0-9]{1,2}`, Domain: "amazonaws.com"},
}

// CloudDomains are the domains AWS owns: plain HTTP is refused under them.
var CloudDomains = []string{"amazonaws.com", "amazonaws.com.cn", "api.aws"}

// CloudHosts are the hosts AWS operates for S3, STS and Glue, per
// partition, as its endpoint references name them: path-style and
// virtual-hosted buckets, regional, legacy, dual-stack and FIPS
// endpoints, access points (and multi-region ones), S3 Express directory
// buckets, Transfer Acceleration, and the interface VPC endpoints of S3
// and STS. Names AWS's
// customers operate under amazonaws.com (API Gateway's execute-api, EC2's
// compute names, load balancers, S3 website and Object Lambda endpoints,
// other PrivateLink services) match no row.
var CloudHosts = store.ExpandHosts("aws", Partitions, []store.CloudHost{
	{Use: store.UseStorage, Pattern: "s3.amazonaws.com", Partition: "aws"},
	{Use: store.UseStorage, Pattern: "{bucket}.s3.amazonaws.com", Partition: "aws"},
	{Use: store.UseStorage, Pattern: "s3-external-1.amazonaws.com", Partition: "aws"},
	{Use: store.UseStorage, Pattern: "{bucket}.s3-external-1.amazonaws.com", Partition: "aws"},
	{Use: store.UseStorage, Pattern: "{bucket}.accesspoint.s3-global.amazonaws.com", Partition: "aws"},
	{Use: store.UseStorage, Pattern: "{bucket}.s3-accelerate.amazonaws.com", Partition: "aws"},
	{Use: store.UseStorage, Pattern: "{bucket}.s3-accelerate.dualstack.amazonaws.com", Partition: "aws"},
	{Use: store.UseStorage, Pattern: "s3.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "{bucket}.s3.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "s3-{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "{bucket}.s3-{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "s3.dualstack.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "{bucket}.s3.dualstack.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "s3-fips.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "{bucket}.s3-fips.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "s3-fips.dualstack.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "{bucket}.s3-fips.dualstack.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "{label}.s3-accesspoint.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "{label}.s3-accesspoint.dualstack.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "{label}.s3-accesspoint-fips.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "{label}.s3-accesspoint-fips.dualstack.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "s3express-control.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "s3express-{az}.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "{bucket}.s3express-{az}.{region}.{domain}"},
	{Use: store.UseStorage, Pattern: "{vpce}.s3.{region}.vpce.{domain}"},
	{Use: store.UseStorage, Pattern: "{bucket}.{vpce}.s3.{region}.vpce.{domain}"},
	{Use: store.UseToken, Pattern: "sts.amazonaws.com", Partition: "aws"},
	{Use: store.UseToken, Pattern: "sts.{region}.{domain}"},
	{Use: store.UseToken, Pattern: "sts-fips.{region}.{domain}"},
	{Use: store.UseToken, Pattern: "sts.{region}.api.aws", Partition: "aws"},
	{Use: store.UseToken, Pattern: "{vpce}.sts.{region}.vpce.{domain}"},
	{Use: store.UseCatalog, Pattern: "glue.{region}.{domain}"},
	{Use: store.UseCatalog, Pattern: "glue-fips.{region}.{domain}"},
})

// PartitionOf returns the partition of an AWS region; false for a name
// that is the region of none.
func PartitionOf(region string) (store.Partition, bool) {
	for i, p := range Partitions {
		if partitionRegions[i].MatchString(region) {
			return p, true
		}
	}
	return store.Partition{}, false
}

var partitionRegions = func() []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(Partitions))
	for i, p := range Partitions {
		out[i] = regexp.MustCompile(`^(?:` + p.Region + `)$`)
	}
	return out
}()

// partitionHost returns service's regional host in region's partition
// (service.amazonaws.com for no region).
func partitionHost(service, region string) (string, error) {
	if region == "" {
		return service + ".amazonaws.com", nil
	}
	if err := CheckRegion(region); err != nil {
		return "", err
	}
	p, ok := PartitionOf(region)
	if !ok {
		return "", fmt.Errorf("region %q is a region of no AWS partition shardfeed knows (aws, aws-us-gov, aws-cn, e.g. us-east-1, us-gov-west-1, cn-north-1): for another store, name its endpoint", region)
	}
	return service + "." + region + "." + p.Domain, nil
}

// DefaultHost is the host an s3:// source without an endpoint reaches:
// S3 in its region's partition.
func DefaultHost(_ *url.URL, region string) (string, error) {
	return partitionHost("s3", region)
}

// GlueHost is AWS Glue's host in a region.
func GlueHost(region string) (string, error) { return partitionHost("glue", region) }

// isAWSHost says whether host (no port) is one AWS operates.
func isAWSHost(host string) bool {
	for _, h := range CloudHosts {
		if _, ok := h.Match(host); ok {
			return true
		}
	}
	return false
}

// AudienceAllowed is whether a workload identity's audience is AWS STS's.
func AudienceAllowed(audience string) bool {
	return audience == Audience || audience == "sts.amazonaws.com.cn"
}
