package shardfeed_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sys/unix"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
)

// The hand-off's golden frames (docs/handoff.md): what a sidecar sent,
// byte by byte and descriptor by descriptor, replayed to this client.

type transcript struct {
	Target string `json:"target"`
	Chunks []struct {
		At, End  int
		Kind     string
		Slot     *int
		Gen      uint64
		Bytes    int
		Contents string
	} `json:"chunks"`
	Control struct {
		Released  []uint64
		Read, Seq uint64
	} `json:"control"`
}

// replayer is a sidecar that says only what a recording says: it writes
// a slot only once the client released the batch before in it, as a
// sidecar must.
type replayer struct {
	socket string
	ctl    []byte
	ctlFD  int
	slots  int
	target chan string
	done   chan error
}

// word is control word i, as the client last wrote it.
func (r *replayer) word(i int) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.ctl[8*i])))
}

// replay serves the recording in dir to one connection.
func replay(t *testing.T, dir string, tr transcript) *replayer {
	t.Helper()
	resp, err := os.ReadFile(filepath.Join(dir, "response.bin"))
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "sfreplay") // a socket's path is short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	r := &replayer{socket: filepath.Join(sockDir, "feed.sock"), target: make(chan string, 1), done: make(chan error, 1)}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: r.socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	// The control segment is mapped before the client connects, so a test
	// may read it after the replay.
	r.ctlFD = -1
	for _, c := range tr.Chunks {
		if c.Kind == "C" {
			if r.ctlFD, r.ctl, err = newSegment(c.Bytes); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = unix.Munmap(r.ctl); _ = unix.Close(r.ctlFD) })
			r.slots = controlSlots(t, resp[c.At:c.End])
		}
	}
	go func() { r.done <- r.serve(ln, dir, resp, tr) }()
	return r
}

func newSegment(size int) (int, []byte, error) {
	fd, err := unix.MemfdCreate("replay", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, nil, err
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		_ = unix.Close(fd)
		return -1, nil, err
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Close(fd)
		return -1, nil, err
	}
	return fd, mem, nil
}

func (r *replayer) serve(ln *net.UnixListener, dir string, resp []byte, tr transcript) error {
	conn, err := ln.AcceptUnix()
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		return err
	}
	r.target <- req.URL.RequestURI()
	// The sidecar's waiting word stays set: the client wakes it after
	// each read and release.
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&r.ctl[8*(r.slots+2)])), 1)
	segs := map[int][]byte{}
	gens := map[int]uint64{}
	pos := 0
	for _, c := range tr.Chunks {
		if _, err := conn.Write(resp[pos:c.At]); err != nil {
			return err
		}
		chunk := resp[c.At:c.End]
		fd := -1
		switch c.Kind {
		case "C":
			fd = r.ctlFD
		case "S":
			var mem []byte
			if fd, mem, err = newSegment(c.Bytes); err != nil {
				return err
			}
			defer func() { _ = unix.Munmap(mem) }()
			segs[*c.Slot] = mem
		case "B":
			if err := r.waitRelease(*c.Slot, gens[*c.Slot]); err != nil {
				return err
			}
			data, err := os.ReadFile(filepath.Join(dir, c.Contents))
			if err != nil {
				return err
			}
			copy(segs[*c.Slot], data)
			gens[*c.Slot] = c.Gen
		}
		if fd >= 0 {
			_, _, err = conn.WriteMsgUnix(chunk, unix.UnixRights(fd), nil)
			if c.Kind == "S" {
				_ = unix.Close(fd)
			}
		} else {
			_, err = conn.Write(chunk)
		}
		if err != nil {
			return err
		}
		pos = c.End
	}
	// The terminal chunk: a client that stops at the end-of-stream
	// marker may have closed its end already, as it may.
	if _, err := conn.Write(resp[pos:]); err != nil && !closedByPeer(err) {
		return err
	}
	// The client's end of the connection ends the replay.
	if _, err = io.Copy(io.Discard, conn); err != nil && !closedByPeer(err) {
		return err
	}
	return nil
}

// closedByPeer is an error of a write or read on a connection the other
// end closed.
func closedByPeer(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// waitRelease waits until the client released generation gen of slot
// (0: the slot was never used).
func (r *replayer) waitRelease(slot int, gen uint64) error {
	deadline := time.Now().Add(30 * time.Second)
	for r.word(slot) != gen {
		if time.Now().After(deadline) {
			return fmt.Errorf("the client never released generation %d of slot %d", gen, slot)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// TestTheClientReadsTheGoldenFrames replays each recording of the
// hand-off to the client: it asks for the stream as the recording did,
// yields each batch with its rows and whether it came in a slot, and
// leaves the control words as the recording's client did (every batch
// read and released, the sequence word bumped once for each).
func TestTheClientReadsTheGoldenFrames(t *testing.T) {
	for _, name := range []string{"releases", "keeps"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "testdata", "handoff", name)
			var tr transcript
			readJSON(t, filepath.Join(dir, "transcript.json"), &tr)
			want := readBatches(t, filepath.Join(dir, "batches.jsonl"))
			r := replay(t, dir, tr)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			epoch := int64(0)
			st, err := shardfeed.New(r.socket).Batches(ctx, shardfeed.Request{Rank: 0, World: 4, Epoch: &epoch, Handoff: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := <-r.target; got != tr.Target {
				t.Errorf("asked for %s, the recording for %s", got, tr.Target)
			}
			var got []wireBatch
			for {
				rec, err := st.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("batch %d: %v", len(got)+1, err)
				}
				var rows bytes.Buffer
				if err := array.RecordToJSON(rec, &rows); err != nil {
					t.Fatal(err)
				}
				got = append(got, wireBatch{InSlot: st.HandedOff(), Rows: parseRows(t, rows.Bytes())})
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-r.done; err != nil {
				t.Fatalf("the replay: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the client yielded\n%v\nthe recording's batches are\n%v", got, want)
			}
			checkControl(t, r, tr)
		})
	}
}

func checkControl(t *testing.T, r *replayer, tr transcript) {
	t.Helper()
	var released []uint64
	for i := range r.slots {
		released = append(released, r.word(i))
	}
	if !reflect.DeepEqual(released, tr.Control.Released) {
		t.Errorf("released generations %v, want %v", released, tr.Control.Released)
	}
	if read, seq := r.word(r.slots), r.word(r.slots+1); read != tr.Control.Read || seq != tr.Control.Seq {
		t.Errorf("descriptors read %d, sequence %d; want %d, %d", read, seq, tr.Control.Read, tr.Control.Seq)
	}
}

type wireBatch struct {
	InSlot bool             `json:"inSlot"`
	Rows   []map[string]any `json:"rows"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readBatches(t *testing.T, path string) []wireBatch {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []wireBatch
	for line := range bytes.Lines(data) {
		var b wireBatch
		if err := json.Unmarshal(line, &b); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, b)
	}
	return out
}

func parseRows(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range bytes.Lines(data) {
		var row map[string]any
		if err := json.Unmarshal(line, &row); err != nil {
			t.Fatal(err)
		}
		out = append(out, row)
	}
	return out
}

// controlSlots is N of a C chunk's {"slots":N}.
func controlSlots(t *testing.T, chunk []byte) int {
	t.Helper()
	body := chunk[bytes.IndexByte(chunk, '\n')+2 : len(chunk)-2]
	var f struct{ Slots int }
	if err := json.Unmarshal(body, &f); err != nil {
		t.Fatalf("the control chunk %q: %v", chunk, err)
	}
	return f.Slots
}
