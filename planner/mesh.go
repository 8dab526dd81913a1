package planner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A Mesh is the layout of a job's ranks over its parallelism dimensions,
// as torch's DeviceMesh lays them out: dimensions outermost first, the
// global rank the row-major index of its coordinates. The data-parallel
// dimensions (named dp or dp_*, e.g. HSDP's dp_replicate and dp_shard)
// decide which batches a rank receives; the others (tp, cp, pp, …) only
// replicate them: ranks that share every data-parallel coordinate form a
// replication group and receive identical batches.
type Mesh struct {
	Dims []MeshDim
}

// MeshDim is one dimension of a Mesh.
type MeshDim struct {
	Name string
	Size int
}

// maxMeshRanks bounds a mesh's size: more ranks than any cluster runs.
const maxMeshRanks = 1 << 24

// ParseMesh reads a mesh written as "pp=2,dp=4,tp=8" (outermost first).
// At least one dimension must be data-parallel.
func ParseMesh(s string) (Mesh, error) {
	var m Mesh
	seen := map[string]bool{}
	size := 1
	for _, part := range strings.Split(s, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 1 || !meshName(name) {
			return Mesh{}, fmt.Errorf("mesh %q: %q is not name=size (a name of lowercase letters, digits and _, a positive size): write it as dp=4,tp=2, outermost dimension first", s, part)
		}
		if seen[name] {
			return Mesh{}, fmt.Errorf("mesh %q: dimension %s is given twice", s, name)
		}
		seen[name] = true
		if size > maxMeshRanks/n {
			return Mesh{}, fmt.Errorf("mesh %q has more than %d ranks", s, maxMeshRanks)
		}
		size *= n
		m.Dims = append(m.Dims, MeshDim{Name: name, Size: n})
	}
	if m.DataParallelSize() == 0 {
		return Mesh{}, fmt.Errorf("mesh %q has no data-parallel dimension: name it dp (or dp_replicate, dp_shard: every dp or dp_* dimension is data-parallel)", s)
	}
	return m, nil
}

func meshName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// DataParallelDim reports whether a dimension of that name is
// data-parallel.
func DataParallelDim(name string) bool { return name == "dp" || strings.HasPrefix(name, "dp_") }

// String writes the mesh as ParseMesh reads it.
func (m Mesh) String() string {
	parts := make([]string, len(m.Dims))
	for i, d := range m.Dims {
		parts[i] = d.Name + "=" + strconv.Itoa(d.Size)
	}
	return strings.Join(parts, ",")
}

// Size returns the number of ranks of the mesh.
func (m Mesh) Size() int {
	n := 1
	for _, d := range m.Dims {
		n *= d.Size
	}
	return n
}

// DataParallelSize returns the number of data-parallel ranks (the product
// of the data-parallel dimensions), 0 with none.
func (m Mesh) DataParallelSize() int {
	n, any := 1, false
	for _, d := range m.Dims {
		if DataParallelDim(d.Name) {
			n *= d.Size
			any = true
		}
	}
	if !any {
		return 0
	}
	return n
}

// DataParallelRank returns the data-parallel rank of global rank r: the
// row-major index of its data-parallel coordinates.
func (m Mesh) DataParallelRank(r int) int {
	coords := make([]int, len(m.Dims))
	for i := len(m.Dims) - 1; i >= 0; i-- {
		coords[i] = r % m.Dims[i].Size
		r /= m.Dims[i].Size
	}
	dp := 0
	for i, d := range m.Dims {
		if DataParallelDim(d.Name) {
			dp = dp*d.Size + coords[i]
		}
	}
	return dp
}

// CheckReplication checks that a job of world ranks in dataParallel
// replication groups can run the plan: only the data-parallel ranks count
// toward "the world size divides numSplits".
func (pl *Plan) CheckReplication(world, dataParallel int) error {
	if dataParallel < 1 || pl.params.NumSplits%dataParallel != 0 {
		return fieldErr("data-parallel size", "%d does not divide spec.numSplits (%d): run with a data-parallel size that divides it (%s)",
			dataParallel, pl.params.NumSplits, divisors(pl.params.NumSplits))
	}
	if world < 1 || world%dataParallel != 0 {
		return fieldErr("data-parallel size", "%d does not divide the world size %d: each of the %d data-parallel ranks is a replication group of the same number of ranks", dataParallel, world, dataParallel)
	}
	return nil
}

// PodRanks returns the data-parallel ranks each pod serves when the mesh's
// ranks run procsPerPod to a pod (global rank r on pod r div procsPerPod),
// each pod's in increasing order.
func (m Mesh) PodRanks(procsPerPod int) [][]int {
	procsPerPod = max(procsPerPod, 1)
	pods := make([][]int, ceilDiv(int64(m.Size()), int64(procsPerPod)))
	for r := range m.Size() {
		pod := r / procsPerPod
		if d := m.DataParallelRank(r); !slices.Contains(pods[pod], d) {
			pods[pod] = append(pods[pod], d)
		}
	}
	for _, rs := range pods {
		slices.Sort(rs)
	}
	return pods
}

// Spread returns the most pods any one replication group has ranks on:
// what multiplies the egress bound (each of those pods fetches the group's
// shards).
func Spread(podRanks [][]int) int {
	pods := map[int]int{}
	most := 0
	for _, rs := range podRanks {
		for _, d := range rs {
			pods[d]++
			most = max(most, pods[d])
		}
	}
	return most
}
