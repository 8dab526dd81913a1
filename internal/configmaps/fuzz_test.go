package configmaps

import (
	"reflect"
	"testing"
)

// FuzzParseState: a state ConfigMap edited by hand or cut short gives an
// error, never a panic; a state it accepts survives a write and a read
// unchanged.
func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"layout": 1, "epoch": 2, "step": 17, "attempt": "a2", "fingerprint": "v1-abc", "attempts": ["a1", "a2"], "history": [{"epoch": 2, "step": 17, "attempt": "a2", "time": "2026-11-22T10:00:00Z"}]}`))
	f.Add([]byte(`{"layout": 1}`))
	f.Add([]byte(`{"layout": 9, "epoch": -1}`))
	f.Add([]byte(`{"layout": 1, "step": 1e40}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseState(data)
		if err != nil {
			return
		}
		d, err := StateData(s)
		if err != nil {
			t.Fatalf("an accepted state does not encode: %v", err)
		}
		back, err := StateFromData(d)
		if err != nil {
			t.Fatalf("an accepted state does not read back: %v", err)
		}
		if back.Epoch != s.Epoch || back.Step != s.Step || back.Attempt != s.Attempt || back.Newest() != s.Newest() {
			t.Fatalf("state changed on a round trip: %+v, then %+v", s, back)
		}
	})
}

// FuzzPlanFromData: a plan ConfigMap with any values under its keys gives
// an error, never a panic; a plan it accepts survives a write and a read.
func FuzzPlanFromData(f *testing.F) {
	p := samplePlan()
	d, err := p.Data()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(d[KeySpec], d[KeyInputs], d[KeyStreams], d[KeyMinCache], d[KeyFingerprint])
	f.Add("{}", "null", "[]", `{"x": 1}`, "")
	f.Fuzz(func(t *testing.T, spec, inputs, streams, minCache, sum string) {
		data := map[string]string{KeyLayout: d[KeyLayout], KeyPlanVersion: d[KeyPlanVersion], KeySpec: spec, KeyInputs: inputs,
			KeyStreams: streams, KeyMinCache: minCache, KeyFingerprint: sum}
		got, err := PlanFromData(data)
		if err != nil {
			return
		}
		again, err := got.Data()
		if err != nil {
			t.Fatalf("an accepted plan does not encode: %v", err)
		}
		back, err := PlanFromData(again)
		if err != nil {
			t.Fatalf("an accepted plan does not read back: %v", err)
		}
		if back.Fingerprint.Sum != got.Fingerprint.Sum || !reflect.DeepEqual(back.MinCacheBytes, got.MinCacheBytes) {
			t.Fatalf("plan changed on a round trip: %+v, then %+v", got, back)
		}
	})
}
