// Package record is the line the e2e trainer appends for every step a rank
// trains, and the scenario's checker reads.
package record

import "time"

// Record is one step a rank trained: which attempt (the Job's UID) and
// barrier generation, the rank in its world, the step and its sample ids.
type Record struct {
	Attempt string  `json:"attempt"`
	Gen     int     `json:"gen"`
	Rank    int     `json:"rank"`
	World   int     `json:"world"`
	Epoch   int64   `json:"epoch"`
	Step    int64   `json:"step"`
	IDs     []int64 `json:"ids"`
	// Pad lists the rows marked _shardfeed_pad.
	Pad  []int     `json:"pad,omitempty"`
	Time time.Time `json:"time"`
	// HandedOff: the batch came in the sidecar's shared memory, not in the
	// stream.
	HandedOff bool `json:"handedOff,omitempty"`
}
