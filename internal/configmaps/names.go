package configmaps

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Kubernetes' limits on the names and label values shardfeed derives.
const (
	maxName       = 253
	maxLabelValue = 63
)

// PlanName is the name of a dataset's plan ConfigMap: <dataset>-plan, or
// for a dataset name too long for that, its start, a hash of the whole
// name and -plan. Dataset names are unique in a namespace, so plan names
// are too; the reconciler still refuses a plan ConfigMap another dataset
// owns.
func PlanName(dataset string) string {
	const suffix = "-plan"
	if len(dataset)+len(suffix) <= maxName {
		return dataset + suffix
	}
	return shorten(dataset, maxName-len(suffix), dataset) + suffix
}

// StateName is the name of a job's state ConfigMap:
// <dataset>-<job>-<hash>-state, where the hash is of the pair, so that
// ("a-b", "c") and ("a", "b-c") get two ConfigMaps. Names too long keep
// their start and the hash.
func StateName(dataset, job string) string {
	const suffix = "-state"
	// "/" appears in neither name: the hashed text is injective.
	h := hash(dataset + "/" + job)
	readable := dataset + "-" + job
	if len(readable)+1+len(h)+len(suffix) > maxName {
		readable = trimEnd(readable[:maxName-1-len(h)-len(suffix)])
	}
	return readable + "-" + h + suffix
}

// LabelValue is v, or where v is longer than a label value may be, its
// start and a hash of the whole.
func LabelValue(v string) string {
	if len(v) <= maxLabelValue {
		return v
	}
	return shorten(v, maxLabelValue, v)
}

// shorten cuts s to n characters ending in a hash of whole.
func shorten(s string, n int, whole string) string {
	h := hash(whole)
	return trimEnd(s[:n-1-len(h)]) + "-" + h
}

// trimEnd drops the separators a cut left at the end (a name's last
// character must be alphanumeric).
func trimEnd(s string) string { return strings.TrimRight(s, "-._") }

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}
