package sidecarconfig

import (
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/planner"
)

func TestPlacement(t *testing.T) {
	// A plan of 8 splits: worlds of 1, 2, 4 and 8 ranks divide it.
	pl, err := planner.New(planner.Params{Streams: []planner.Stream{{Name: "a", Index: planner.StreamIndex{Shards: []planner.Shard{{Samples: 64, Bytes: 64}}}}},
		Seed: 1, NumSplits: 8, GlobalBatchSize: 8, DropLast: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		p         Placement
		world     int
		lo, hi    int
		podScoped bool
		err       string
	}{
		{name: "pod mode", p: Placement{RankMode: RankModePod, Pod: 1, Pods: 2, ProcsPerPod: 2}, world: 4, lo: 2, hi: 4, podScoped: true},
		{name: "procs per pod unset is one", p: Placement{RankMode: RankModePod, Pod: 3, Pods: 4}, world: 4, lo: 3, hi: 4, podScoped: true},
		{name: "replication groups: not pod-scoped", p: Placement{RankMode: RankModePod, Pod: 0, Pods: 2, ProcsPerPod: 4, DataParallel: 2}, world: 8, lo: 0, hi: 4},
		{name: "client mode", p: Placement{RankMode: RankModeClient, Pods: 1, ProcsPerPod: 1}, world: 1, lo: 0, hi: 1},
		{name: "pod outside the job", p: Placement{RankMode: RankModePod, Pod: 2, Pods: 2, ProcsPerPod: 1}, world: 2, lo: 2, hi: 3, podScoped: true,
			err: "rank mode pod needs the pod's rank in [0, pods): got pod 2 of 2"},
		{name: "a world that does not divide the splits", p: Placement{RankMode: RankModePod, Pod: 0, Pods: 3, ProcsPerPod: 1}, world: 3, lo: 0, hi: 1, podScoped: true,
			err: "3 pods × 1 procs per pod: world size: 3 ranks do not divide spec.numSplits (8)"},
		{name: "replication groups that do not divide the world", p: Placement{RankMode: RankModePod, Pod: 0, Pods: 2, ProcsPerPod: 2, DataParallel: 3}, world: 4, lo: 0, hi: 2,
			err: "2 pods × 2 procs per pod:"},
		{name: "an unknown rank mode", p: Placement{RankMode: "node", Pods: 1}, world: 1, lo: 0, hi: 1, err: `rank mode "node" is not supported: use pod or client`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := tt.p.Ranks()
			if tt.p.World() != tt.world || lo != tt.lo || hi != tt.hi || tt.p.PodScoped() != tt.podScoped {
				t.Errorf("world %d, ranks [%d, %d), pod-scoped %v; want %d, [%d, %d), %v", tt.p.World(), lo, hi, tt.p.PodScoped(), tt.world, tt.lo, tt.hi, tt.podScoped)
			}
			err := tt.p.Check(pl)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("Check = %v, want %q", err, tt.err)
			}
		})
	}
}
