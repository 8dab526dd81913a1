package configmaps_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/planner"
)

// The Go client is a module of its own, with no import of the operator's
// packages: what it decodes must still be what the sidecar sends. Every
// field of the client's State reads the state record's value, its
// ResumeAt is the record's rule, and its sockets are the webhook's and
// serve's.
func TestTheGoClientReadsTheStateRecordTheSidecarSends(t *testing.T) {
	if shardfeed.PodSocket != sidecarconfig.SocketPath || shardfeed.LocalSocket != sidecarconfig.LocalSocket {
		t.Fatalf("the client's sockets %q, %q are not the webhook's and serve's %q, %q",
			shardfeed.PodSocket, shardfeed.LocalSocket, sidecarconfig.SocketPath, sidecarconfig.LocalSocket)
	}
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	sent := configmaps.State{
		Layout: 1, Dataset: "web", Job: "train", Epoch: 2, Step: 7, Committed: &at, Attempt: "a-1", Generation: 3,
		Fingerprint: planner.Fingerprint{Sum: "v3-abc", Inputs: map[string]string{"numSplits": "8"}},
		Pods:        4, WorldSize: 8, DataParallelSize: 2, SkippedShards: 1, SkippedSamples: 10, SidecarImage: "img", PlanVersion: 3,
		History: []configmaps.Commit{{Epoch: 2, Step: 7, Attempt: "a-1", Resumed: true, Time: at}},
	}
	raw, err := json.Marshal(sent)
	if err != nil {
		t.Fatal(err)
	}
	var got shardfeed.State
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	// Every field of the client's State, by its JSON name, against the
	// record's.
	var record map[string]json.RawMessage
	_ = json.Unmarshal(raw, &record)
	back, _ := json.Marshal(got)
	var client map[string]json.RawMessage
	_ = json.Unmarshal(back, &client)
	st := reflect.TypeOf(got)
	for i := range st.NumField() {
		name := st.Field(i).Tag.Get("json")
		if j := len(name); j > 0 {
			for k := range name {
				if name[k] == ',' {
					j = k
					break
				}
			}
			name = name[:j]
		}
		if string(client[name]) != string(record[name]) {
			t.Errorf("%s: the client reads %s, the sidecar sent %s", name, client[name], record[name])
		}
	}
	for _, steps := range []int64{0, 7, 8} {
		e1, s1 := sent.ResumeAt(steps)
		e2, s2 := got.ResumeAt(steps)
		if e1 != e2 || s1 != s2 {
			t.Errorf("ResumeAt(%d): the record says (%d, %d), the client (%d, %d)", steps, e1, s1, e2, s2)
		}
	}
}
