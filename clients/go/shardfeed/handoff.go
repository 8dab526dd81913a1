package shardfeed

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	handoff "github.com/shardfeed/shardfeed/clients/go/handoffwire"
)

// A stream handed over in shared memory (docs/sidecar.md, "The hand-off
// through shared memory"): the chunks are frames, and a batch's Arrow IPC
// bytes are in a memfd segment the sidecar wrote and this client maps.
// This client copies them into its records (the Arrow reader's buffers)
// and releases the slot at once, so its records live as long as it likes.

// fdReader reads a Unix connection and keeps, in order, the descriptors
// that come with the bytes: a plain read would drop (close) them.
type fdReader struct {
	conn *net.UnixConn
	oob  []byte
	fds  []int
}

func (r *fdReader) Read(p []byte) (int, error) {
	n, oobn, flags, _, err := r.conn.ReadMsgUnix(p, r.oob)
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(r.oob[:oobn])
		if perr == nil {
			for _, m := range msgs {
				if fds, err := unix.ParseUnixRights(&m); err == nil {
					r.fds = append(r.fds, fds...)
				}
			}
		}
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return n, errors.New("the sidecar's shared-memory descriptors were cut off (MSG_CTRUNC)")
	}
	if n == 0 && err == nil {
		err = io.EOF
	}
	return n, err
}

func (r *fdReader) next() (int, error) {
	if len(r.fds) == 0 {
		return -1, errors.New("a shared-memory segment came without its descriptor")
	}
	fd := r.fds[0]
	r.fds = r.fds[1:]
	return fd, nil
}

// handoffBody is the Arrow IPC stream a hand-off carries, read frame by
// frame: the bytes of chunks of kind A, and of the slots frames of kind B
// point at.
type handoffBody struct {
	conn    *net.UnixConn
	fds     *fdReader
	br      *bufio.Reader
	framed  bool
	ctlMem  []byte
	ctl     *handoff.Control
	slots   [][]byte
	read    uint64
	cur     []byte
	release func()
	ended   bool
	// inMemory: the last frame of Arrow bytes was a slot (B).
	inMemory bool
}

// openHandoff sends GET target on a connection of its own and returns its
// body and headers.
func (c *Client) openHandoff(ctx context.Context, target string) (*handoffBody, http.Header, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, nil, fmt.Errorf("sidecar at %s: %w", c.socket, err)
	}
	uc := conn.(*net.UnixConn)
	_ = uc.SetReadBuffer(4 << 20)
	stop := context.AfterFunc(ctx, func() { _ = uc.Close() })
	defer stop()
	fail := func(err error) (*handoffBody, http.Header, error) {
		_ = uc.Close()
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return nil, nil, fmt.Errorf("sidecar at %s: %w", c.socket, err)
	}
	if _, err := fmt.Fprintf(uc, "GET %s HTTP/1.1\r\nHost: shardfeed\r\n\r\n", target); err != nil {
		return fail(err)
	}
	fds := &fdReader{conn: uc, oob: make([]byte, unix.CmsgSpace(16*4))}
	br := bufio.NewReaderSize(fds, 64<<10)
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		return fail(err)
	}
	parts := strings.SplitN(line, " ", 3)
	status := 0
	if len(parts) >= 2 {
		status, _ = strconv.Atoi(parts[1])
	}
	mime, err := tp.ReadMIMEHeader()
	if err != nil || status == 0 {
		return fail(fmt.Errorf("a malformed answer %q: %w", line, err))
	}
	h := http.Header(mime)
	if status/100 != 2 {
		e := &APIError{Status: status}
		n, _ := strconv.Atoi(h.Get("Content-Length"))
		data := make([]byte, min(max(n, 0), 1<<16))
		_, _ = io.ReadFull(br, data)
		if json.Unmarshal(data, e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(data))
		}
		_ = uc.Close()
		return nil, nil, e
	}
	if !strings.EqualFold(h.Get("Transfer-Encoding"), "chunked") {
		return fail(errors.New("the batch stream is not chunked"))
	}
	return &handoffBody{conn: uc, fds: fds, br: br, framed: h.Get("Shardfeed-Handoff") == "memfd"}, h, nil
}

func (b *handoffBody) Read(p []byte) (int, error) {
	for len(b.cur) == 0 {
		if b.release != nil {
			b.release()
			b.release = nil
		}
		if b.ended {
			return 0, io.EOF
		}
		if err := b.frame(); err != nil {
			return 0, err
		}
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	if len(b.cur) == 0 && b.release != nil {
		// Copied: the Arrow reader reads a message whole before it makes the
		// record, so the slot is free once its last byte is here.
		b.release()
		b.release = nil
	}
	return n, nil
}

// maxFrame bounds a control frame's JSON.
const maxFrame = 1024

// frame reads the next chunk: its Arrow bytes become b.cur.
func (b *handoffBody) frame() error {
	line, err := b.br.ReadString('\n')
	if err != nil {
		return unexpected(err)
	}
	size, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(line, ";", 2)[0]), 16, 64)
	if err != nil || size < 0 {
		return fmt.Errorf("a malformed chunk size %q", line)
	}
	if size == 0 {
		b.ended = true
		return nil
	}
	kind := byte(handoff.FrameArrow)
	if b.framed {
		if kind, err = b.br.ReadByte(); err != nil {
			return unexpected(err)
		}
		size--
	}
	if kind != handoff.FrameArrow && size > maxFrame {
		return fmt.Errorf("a frame of kind %q and %d bytes is not part of the protocol", kind, size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(b.br, body); err != nil {
		return unexpected(err)
	}
	if crlf, err := b.br.Peek(2); err != nil || string(crlf) != "\r\n" {
		return errors.New("a chunk of the stream is malformed")
	}
	_, _ = b.br.Discard(2)
	switch kind {
	case handoff.FrameArrow:
		b.cur, b.inMemory = body, false
	case handoff.FrameControl:
		var f struct{ Slots int }
		if err := json.Unmarshal(body, &f); err != nil || f.Slots < 1 || f.Slots > handoff.MaxSlots {
			return fmt.Errorf("a malformed control frame %q", body)
		}
		mem, err := b.mapNext(handoff.ControlBytes(f.Slots))
		if err != nil {
			return err
		}
		b.ctlMem, b.ctl, b.slots = mem, handoff.NewControl(mem, f.Slots), make([][]byte, f.Slots)
	case handoff.FrameSegment:
		var f struct{ Slot, Size int }
		if err := json.Unmarshal(body, &f); err != nil || f.Slot < 0 || f.Slot >= len(b.slots) || f.Size < 1 {
			return fmt.Errorf("a malformed segment frame %q", body)
		}
		mem, err := b.mapNext(f.Size)
		if err != nil {
			return err
		}
		if old := b.slots[f.Slot]; old != nil {
			_ = unix.Munmap(old)
		}
		b.slots[f.Slot] = mem
	case handoff.FrameBatch:
		var f struct {
			Slot int
			Gen  uint64
			Size int
		}
		if err := json.Unmarshal(body, &f); err != nil || f.Slot < 0 || f.Slot >= len(b.slots) || b.slots[f.Slot] == nil || f.Size > len(b.slots[f.Slot]) || f.Size < 0 {
			return fmt.Errorf("a malformed batch frame %q", body)
		}
		b.read++
		b.ctl.Read(b.read)
		b.cur, b.inMemory = b.slots[f.Slot][:f.Size], true
		b.release = func() { b.ctl.Release(f.Slot, f.Gen) }
	default:
		return fmt.Errorf("a frame of kind %q is not part of the protocol", kind)
	}
	return nil
}

// mapNext maps the next descriptor received, size bytes.
func (b *handoffBody) mapNext(size int) ([]byte, error) {
	fd, err := b.fds.next()
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(fd) }()
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping a shared-memory segment of %d bytes: %w", size, err)
	}
	return mem, nil
}

// Close unmaps the segments and closes the connection.
func (b *handoffBody) Close() error {
	for _, m := range b.slots {
		if m != nil {
			_ = unix.Munmap(m)
		}
	}
	if b.ctlMem != nil {
		_ = unix.Munmap(b.ctlMem)
	}
	b.slots, b.ctlMem, b.ctl, b.cur, b.release = nil, nil, nil, nil, nil
	for _, fd := range b.fds.fds {
		_ = unix.Close(fd)
	}
	return b.conn.Close()
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
