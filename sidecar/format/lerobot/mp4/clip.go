package mp4

import (
	"encoding/binary"
	"fmt"
	"math"
)

// MaxClipBytes bounds a clip Clip writes.
const MaxClipBytes = 1 << 30

// Clip writes samples [first, last] of the track (decode order; first a
// keyframe decoding may start at, as DecodeStart gives) as a file of their
// own: an MP4 of one video track with the track's sample entry, timescale
// and composition offsets, and the samples' bytes, which data returns, in
// one media box. Any MP4 reader decodes it (torchcodec, PyAV): what a
// trainer decoding on its GPU is handed. A sample is shown in the clip at
// ClipTime's seconds.
func (t *Track) Clip(first, last int, data func(i int) ([]byte, error)) ([]byte, error) {
	if first < 0 || last < first || last >= len(t.Samples) {
		return nil, fmt.Errorf("samples [%d, %d] of a track of %d", first, last, len(t.Samples))
	}
	if !t.Samples[first].Key {
		return nil, fmt.Errorf("a clip starts at a keyframe; sample %d is not one", first+1)
	}
	if len(t.Entry) == 0 || t.Timescale == 0 {
		return nil, fmt.Errorf("the track has no sample entry or timescale to describe a clip with")
	}
	samples := t.Samples[first : last+1]
	payload := make([][]byte, len(samples))
	var total int64
	for i := range samples {
		b, err := data(first + i)
		if err != nil {
			return nil, err
		}
		if len(b) != int(samples[i].Size) {
			return nil, fmt.Errorf("sample %d is %d bytes, the track says %d", first+i+1, len(b), samples[i].Size)
		}
		payload[i] = b
		total += int64(len(b))
	}
	if total > MaxClipBytes {
		return nil, fmt.Errorf("a clip of %d bytes is over the %d written", total, MaxClipBytes)
	}
	duration := t.clipDuration(first, last)
	var w writer
	w.box("ftyp", func() {
		w.raw([]byte("isom"))
		w.u32(0x200)
		w.raw([]byte("isomiso2mp41"))
	})
	var stco int
	w.box("moov", func() {
		w.box("mvhd", func() {
			w.u32(0) // version 0, flags
			w.u32(0)
			w.u32(0)
			w.u32(t.Timescale)
			w.u32(uint32(min(duration, math.MaxUint32))) //nolint:gosec // clamped
			w.u32(0x00010000)                            // rate 1.0
			w.u16(0x0100)                                // volume 1.0
			w.zeros(10)
			w.matrix()
			w.zeros(24)
			w.u32(2) // next track ID
		})
		w.box("trak", func() {
			w.box("tkhd", func() {
				w.u32(3) // version 0, enabled and in the movie
				w.u32(0)
				w.u32(0)
				w.u32(1) // track ID
				w.u32(0)
				w.u32(uint32(min(duration, math.MaxUint32))) //nolint:gosec // clamped
				w.zeros(8)
				w.zeros(8) // layer, alternate group, volume, reserved
				w.matrix()
				w.u32(uint32(t.Width) << 16)
				w.u32(uint32(t.Height) << 16)
			})
			// The edit list starts the showing at the first sample shown,
			// as FFmpeg's muxer writes it, so every reader puts the
			// clip's frames at ClipTime.
			w.box("edts", func() {
				w.box("elst", func() {
					w.u32(0)
					w.u32(1)
					w.u32(uint32(min(duration, math.MaxUint32)))                                            //nolint:gosec // clamped
					w.u32(uint32(int32(min(t.clipStart(first, last)-t.Samples[first].DTS, math.MaxInt32)))) //nolint:gosec // clamped; a signed field
					w.u32(0x00010000)
				})
			})
			w.box("mdia", func() {
				w.box("mdhd", func() {
					w.u32(0)
					w.u32(0)
					w.u32(0)
					w.u32(t.Timescale)
					w.u32(uint32(min(duration, math.MaxUint32))) //nolint:gosec // clamped
					w.u16(0x55c4)                                // "und"
					w.u16(0)
				})
				w.box("hdlr", func() {
					w.u32(0)
					w.u32(0)
					w.raw([]byte("vide"))
					w.zeros(12)
					w.raw([]byte("VideoHandler\x00"))
				})
				w.box("minf", func() {
					w.box("vmhd", func() { w.u32(1); w.zeros(8) })
					w.box("dinf", func() {
						w.box("dref", func() {
							w.u32(0)
							w.u32(1)
							w.box("url ", func() { w.u32(1) })
						})
					})
					w.box("stbl", func() { stco = t.clipTables(&w, first, samples) })
				})
			})
		})
	})
	mdat := len(w.b) + 8
	if int64(mdat)+total > math.MaxUint32 {
		return nil, fmt.Errorf("a clip of %d bytes is over what 32-bit offsets reach", int64(mdat)+total)
	}
	binary.BigEndian.PutUint32(w.b[stco:], uint32(mdat)) //nolint:gosec // checked above
	w.u32(uint32(8 + total))                             //nolint:gosec // checked above
	w.raw([]byte("mdat"))
	for _, b := range payload {
		w.raw(b)
	}
	return w.b, nil
}

// ClipTime is the second sample i is shown at in the clip of samples
// [first, last]: its time from the first shown.
func (t *Track) ClipTime(first, last, i int) float64 {
	return float64(t.Samples[i].PTS()-t.clipStart(first, last)) / float64(t.Timescale)
}

// clipStart is the clip's first presentation time, in the track's
// (DTS-based) times: where its edit list starts it.
func (t *Track) clipStart(first, last int) int64 {
	start := int64(math.MaxInt64)
	for _, s := range t.Samples[first : last+1] {
		start = min(start, s.PTS())
	}
	return start
}

// clipDuration is the clip's length in the timescale, as shown: from its
// first frame shown to the end of its last, a sample lasting until the
// next one's decode time (the last one as long as the one before it). A
// shorter edit would cut the frames shown last of a clip whose frames
// are reordered.
func (t *Track) clipDuration(first, last int) int64 {
	end := int64(math.MinInt64)
	for i := first; i <= last; i++ {
		end = max(end, t.Samples[i].PTS()+t.sampleDelta(i))
	}
	return end - t.clipStart(first, last)
}

func (t *Track) sampleDelta(i int) int64 {
	switch {
	case i+1 < len(t.Samples):
		return t.Samples[i+1].DTS - t.Samples[i].DTS
	case i > 0:
		return t.Samples[i].DTS - t.Samples[i-1].DTS
	}
	return 1
}

// clipTables writes the sample tables of samples, whose bytes follow in
// one chunk, and returns where the chunk's offset is to be written.
func (t *Track) clipTables(w *writer, first int, samples []Sample) int {
	w.box("stsd", func() {
		w.u32(0)
		w.u32(1)
		w.raw(t.Entry)
	})
	type run struct{ n, delta uint32 }
	var runs []run
	for i := range samples {
		delta := uint32(min(max(t.sampleDelta(first+i), 0), math.MaxUint32)) //nolint:gosec // clamped
		if len(runs) > 0 && runs[len(runs)-1].delta == delta {
			runs[len(runs)-1].n++
		} else {
			runs = append(runs, run{1, delta})
		}
	}
	w.box("stts", func() {
		w.u32(0)
		w.u32(uint32(len(runs))) //nolint:gosec // at most MaxSamples
		for _, r := range runs {
			w.u32(r.n)
			w.u32(r.delta)
		}
	})
	shifted, negative := false, false
	for _, s := range samples {
		shifted = shifted || s.CTS != 0
		negative = negative || s.CTS < 0
	}
	if shifted {
		w.box("ctts", func() {
			if negative {
				w.u32(1 << 24) // version 1: signed offsets
			} else {
				w.u32(0)
			}
			w.u32(uint32(len(samples))) //nolint:gosec // at most MaxSamples
			for _, s := range samples {
				w.u32(1)
				w.u32(uint32(s.CTS)) //nolint:gosec // as stored: signed in version 1
			}
		})
	}
	w.box("stss", func() {
		w.u32(0)
		var keys []uint32
		for i, s := range samples {
			if s.Key {
				keys = append(keys, uint32(i+1)) //nolint:gosec // at most MaxSamples
			}
		}
		w.u32(uint32(len(keys))) //nolint:gosec // at most MaxSamples
		for _, k := range keys {
			w.u32(k)
		}
	})
	w.box("stsc", func() {
		w.u32(0)
		w.u32(1)
		w.u32(1)
		w.u32(uint32(len(samples))) //nolint:gosec // at most MaxSamples
		w.u32(1)
	})
	w.box("stsz", func() {
		w.u32(0)
		w.u32(0)
		w.u32(uint32(len(samples))) //nolint:gosec // at most MaxSamples
		for _, s := range samples {
			w.u32(s.Size)
		}
	})
	var at int
	w.box("stco", func() {
		w.u32(0)
		w.u32(1)
		at = len(w.b)
		w.u32(0)
	})
	return at
}

// writer builds boxes.
type writer struct{ b []byte }

func (w *writer) box(typ string, body func()) {
	start := len(w.b)
	w.u32(0)
	w.raw([]byte(typ))
	body()
	binary.BigEndian.PutUint32(w.b[start:], uint32(len(w.b)-start)) //nolint:gosec // a clip's boxes are bounded by MaxClipBytes
}

func (w *writer) raw(b []byte) { w.b = append(w.b, b...) }
func (w *writer) u16(v uint16) { w.b = binary.BigEndian.AppendUint16(w.b, v) }
func (w *writer) u32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *writer) zeros(n int)  { w.b = append(w.b, make([]byte, n)...) }
func (w *writer) matrix() {
	w.u32(0x00010000)
	w.zeros(12)
	w.u32(0x00010000)
	w.zeros(12)
	w.u32(0x40000000)
}
