package server_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"golang.org/x/sys/unix"

	"github.com/shardfeed/shardfeed/clients/go/handoffwire"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/handoff"
	"github.com/shardfeed/shardfeed/sidecar/server"
)

// The hand-off's wire (docs/handoff.md) as this sidecar writes it,
// recorded under clients/testdata/handoff for the clients' tests, which
// replay it to their own code: a change of a byte on either side fails.

// handoffTarget is the request of the recordings, as the Go client
// writes it.
const handoffTarget = "/v1/batches?epoch=0&handoff=memfd&rank=0&worker=0&workers=1&world=4"

// handoffSlots is the recordings' slots: two, so slots are used again.
const handoffSlots = 2

// wireTranscript is a recording's transcript.json (docs/handoff.md,
// "Golden frames").
type wireTranscript struct {
	Target string      `json:"target"`
	Client string      `json:"client"`
	Chunks []wireChunk `json:"chunks"`
	// Control is the control segment's words once the client has read
	// the stream and dropped every batch.
	Control wireControl `json:"control"`
}

type wireChunk struct {
	// At and End delimit the chunk in response.bin, size line to CRLF.
	At   int    `json:"at"`
	End  int    `json:"end"`
	Kind string `json:"kind"`
	// Slot and Gen of an S or B chunk (Gen of a B only).
	Slot *int   `json:"slot,omitempty"`
	Gen  uint64 `json:"gen,omitempty"`
	// Bytes is the size of the segment whose descriptor came with a C or
	// S chunk.
	Bytes int `json:"bytes,omitempty"`
	// Contents names the file with the first size bytes of a B chunk's
	// slot, as the sidecar wrote them.
	Contents string `json:"contents,omitempty"`
}

type wireControl struct {
	Released []uint64 `json:"released"`
	Read     uint64   `json:"read"`
	Seq      uint64   `json:"seq"`
}

// TestTheHandoffWireIsTheRecordedOne serves a small dataset's epoch to a
// client that releases each batch when it reads the next (as a training
// loop holds the batch it trains on), and to one that keeps every batch
// (its later batches come in the stream), and compares every byte and
// descriptor with the recording the clients' tests replay.
func TestTheHandoffWireIsTheRecordedOne(t *testing.T) {
	for _, tc := range []struct {
		name, client string
		keep         bool
	}{
		{"releases", "releases each batch when it has read the next one, and the last at the end", false},
		{"keeps", "keeps every batch until the end", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socket := serveHandoff(t)
			resp, tr, contents := recordHandoff(t, socket, tc.keep)
			tr.Client = tc.client
			files := map[string][]byte{"response.bin": resp, "batches.jsonl": decodeRecording(t, resp, tr, contents)}
			for name, data := range contents {
				files[name] = data
			}
			doc, err := json.MarshalIndent(tr, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			files["transcript.json"] = append(doc, '\n')
			testenv.MatchRecording(t, filepath.Join("..", "..", "clients", "testdata", "handoff", tc.name),
				"the hand-off's wire (docs/handoff.md; the clients' tests replay it)", files)
		})
	}
}

// serveHandoff serves testServer's sidecar, with a hand-off pool, on a
// Unix socket.
func serveHandoff(t *testing.T) string {
	t.Helper()
	h := testServer(t, nil, func(c *server.Config) {
		c.Handoff = handoff.NewPool(4 << 20)
		c.HandoffSlots = handoffSlots
	})
	dir, err := os.MkdirTemp("", "sfwire") // a socket's path is short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "feed.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return socket
}

// wireReader reads a connection, keeping every byte (all) and, in order,
// the descriptors that came with them.
type wireReader struct {
	conn *net.UnixConn
	all  []byte
	pos  int
	fds  []int
}

func (w *wireReader) fill() error {
	p := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := w.conn.ReadMsgUnix(p, oob)
	w.all = append(w.all, p[:n]...)
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr != nil {
			return perr
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				return err
			}
			w.fds = append(w.fds, fds...)
		}
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return errors.New("descriptors cut off")
	}
	if n == 0 && err == nil {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (w *wireReader) line() (string, error) {
	for {
		if i := bytes.IndexByte(w.all[w.pos:], '\n'); i >= 0 {
			s := string(w.all[w.pos : w.pos+i+1])
			w.pos += i + 1
			return s, nil
		}
		if err := w.fill(); err != nil {
			return "", err
		}
	}
}

func (w *wireReader) take(n int) ([]byte, error) {
	for len(w.all)-w.pos < n {
		if err := w.fill(); err != nil {
			return nil, err
		}
	}
	b := w.all[w.pos : w.pos+n]
	w.pos += n
	return b, nil
}

// fd is the next descriptor received: its segment's size and seals.
func (w *wireReader) fd() (int, int, error) {
	if len(w.fds) == 0 {
		return -1, 0, errors.New("a segment's chunk came without its descriptor")
	}
	fd := w.fds[0]
	w.fds = w.fds[1:]
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return -1, 0, err
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return -1, 0, err
	}
	if want := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL; seals&want != want {
		return -1, 0, fmt.Errorf("a segment sealed %#x, not against shrinking, growing and new seals", seals)
	}
	return fd, int(st.Size), nil
}

// recordHandoff reads handoffTarget's stream from socket as a client
// that releases each batch when it reads the next (keep: only at the end)
// and returns the bytes received, the transcript and each batch's slot
// contents by file name.
func recordHandoff(t *testing.T, socket string, keep bool) ([]byte, wireTranscript, map[string][]byte) {
	t.Helper()
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: shardfeed\r\n\r\n", handoffTarget); err != nil {
		t.Fatal(err)
	}
	w := &wireReader{conn: conn}
	defer func() {
		for _, fd := range w.fds {
			_ = unix.Close(fd)
		}
	}()
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("at byte %d of the response: %v", w.pos, err)
		}
	}
	for {
		line, err := w.line()
		check(err)
		if line == "\r\n" {
			break
		}
	}
	tr := wireTranscript{Target: handoffTarget}
	contents := map[string][]byte{}
	var (
		ctlMem []byte
		ctl    *handoffwire.Control
		slots  [][]byte
		held   []func()
		read   uint64
	)
	mmap := func(fd, size int) []byte {
		defer func() { _ = unix.Close(fd) }()
		mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		check(err)
		t.Cleanup(func() { _ = unix.Munmap(mem) })
		return mem
	}
	for {
		at := w.pos
		line, err := w.line()
		check(err)
		size, err := strconv.ParseInt(strings.TrimSuffix(line, "\r\n"), 16, 32)
		check(err)
		if size == 0 {
			end, err := w.take(2)
			check(err)
			if string(end) != "\r\n" {
				t.Fatalf("the terminal chunk ends %q", end)
			}
			break
		}
		body, err := w.take(int(size) + 2)
		check(err)
		c := wireChunk{At: at, End: w.pos, Kind: string(body[:1])}
		body = body[1 : len(body)-2]
		switch c.Kind {
		case "A":
		case "C":
			var f struct{ Slots int }
			check(json.Unmarshal(body, &f))
			fd, n, err := w.fd()
			check(err)
			c.Bytes = n
			ctlMem = mmap(fd, n)
			ctl = handoffwire.NewControl(ctlMem, f.Slots)
			slots = make([][]byte, f.Slots)
		case "S":
			var f struct{ Slot, Size int }
			check(json.Unmarshal(body, &f))
			fd, n, err := w.fd()
			check(err)
			c.Slot, c.Bytes = &f.Slot, n
			slots[f.Slot] = mmap(fd, f.Size)
		case "B":
			var f struct {
				Slot int
				Gen  uint64
				Size int
			}
			check(json.Unmarshal(body, &f))
			c.Slot, c.Gen = &f.Slot, f.Gen
			c.Contents = fmt.Sprintf("batch-%02d.arrow", len(contents)+1)
			contents[c.Contents] = bytes.Clone(slots[f.Slot][:f.Size])
			// Release the batch before, then say this one is read: the
			// sidecar never finds every slot held while the client has
			// read every descriptor, so it never sends a batch in the
			// stream, and the slots it takes are always the same.
			if !keep {
				for _, release := range held {
					release()
				}
				held = held[:0]
			}
			read++
			ctl.Read(read)
			held = append(held, func() { ctl.Release(f.Slot, f.Gen) })
		default:
			t.Fatalf("a chunk of kind %q", c.Kind)
		}
		tr.Chunks = append(tr.Chunks, c)
	}
	for _, release := range held {
		release()
	}
	if rest, err := io.ReadAll(conn); err != nil || len(rest) > 0 {
		t.Fatalf("after the terminal chunk: %q, %v", rest, err)
	}
	n := len(slots)
	word := func(i int) uint64 { return binary.LittleEndian.Uint64(ctlMem[8*i:]) }
	for i := range n {
		tr.Control.Released = append(tr.Control.Released, word(i))
	}
	tr.Control.Read, tr.Control.Seq = word(n+handoffwire.WordRead), word(n+handoffwire.WordSeq)
	return w.all[:w.pos], tr, contents
}

// decodeRecording is batches.jsonl: for each record batch of the stream,
// in order, whether it came in a slot and its rows as arrow-go writes
// them in JSON.
func decodeRecording(t *testing.T, resp []byte, tr wireTranscript, contents map[string][]byte) []byte {
	t.Helper()
	var stream []byte
	var inSlot []bool
	for _, c := range tr.Chunks {
		switch c.Kind {
		case "A":
			body := resp[c.At:c.End]
			body = body[bytes.IndexByte(body, '\n')+2 : len(body)-2]
			stream = append(stream, body...)
			inSlot = append(inSlot, false)
		case "B":
			stream = append(stream, contents[c.Contents]...)
			inSlot = append(inSlot, true)
		}
	}
	r, err := ipc.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var out bytes.Buffer
	// Each chunk holds one batch, but the first's also holds the schema
	// and the last's only the end-of-stream marker.
	for i := 0; r.Next(); i++ {
		var rows bytes.Buffer
		if err := array.RecordToJSON(r.RecordBatch(), &rows); err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(struct {
			InSlot bool              `json:"inSlot"`
			Rows   []json.RawMessage `json:"rows"`
		}{inSlot[i], rawLines(rows.Bytes())})
		if err != nil {
			t.Fatal(err)
		}
		out.Write(append(line, '\n'))
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func rawLines(b []byte) []json.RawMessage {
	var out []json.RawMessage
	for line := range bytes.Lines(b) {
		out = append(out, json.RawMessage(bytes.TrimSpace(line)))
	}
	return out
}
