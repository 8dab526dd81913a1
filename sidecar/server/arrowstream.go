package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/shardfeed/shardfeed/sidecar/handoff"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
)

// streamConn writes an Arrow IPC stream as an HTTP/1.1 chunked body on a
// hijacked connection: each IPC message (a batch) becomes one chunk sent
// with one writev, whose iovecs point at the batch's buffers — and, for a
// zero-copy batch, straight at the rows in the decoded shards — so the
// bytes are copied once, into the socket. Ending without the terminal
// chunk (closing the connection) tells the client the stream was cut.
type streamConn struct {
	pipeline.MessageWriter
	conn net.Conn
	bufs net.Buffers
	// handoff, when set, frames the stream for a hand-off through memory:
	// every chunk starts with its kind (handoff.Frame*), and batches go into the
	// stream's shared segments.
	handoff *handoff.Stream
	// desc and chunkBuf are reused for each batch's descriptor.
	desc, chunkBuf []byte
}

// flush sends what was written since the last flush as one chunk.
func (c *streamConn) flush() error {
	if c.Len() == 0 {
		return nil
	}
	size := c.Len()
	var kind []byte
	if c.handoff != nil {
		kind = []byte{handoff.FrameArrow}
		size++
	}
	c.bufs = append(c.bufs[:0], fmt.Appendf(nil, "%x\r\n", size), kind)
	c.bufs = c.Take(c.bufs)
	c.bufs = append(c.bufs, []byte("\r\n"))
	bufs := c.bufs // WriteTo consumes its receiver
	_, err := bufs.WriteTo(c.conn)
	return err
}

// handOff writes what was written since the last flush (a batch) into a
// free slot and sends its descriptor, or sends it as a chunk when the
// stream has no slot for it.
func (c *streamConn) handOff(ctx context.Context) error {
	if c.handoff == nil {
		return c.flush()
	}
	slot, err := c.handoff.Take(ctx, c.Len())
	if err != nil || slot == nil {
		return errors.Join(err, c.flush())
	}
	// The batch's values may be views of mapped cached shards.
	var n int
	if err := pipeline.GuardFaults(func() error { n = c.CopyTo(slot.Mem); return nil }); err != nil {
		return err
	}
	if slot.FD >= 0 {
		if err := c.frame(handoff.FrameSegment, map[string]int{"slot": slot.Index, "size": len(slot.Mem)}, slot.FD); err != nil {
			return err
		}
	}
	// The descriptor, as JSON, without reflection: one per batch.
	body := c.desc[:0]
	body = append(body, `{"gen":`...)
	body = strconv.AppendUint(body, slot.Gen, 10)
	body = append(body, `,"size":`...)
	body = strconv.AppendInt(body, int64(n), 10)
	body = append(body, `,"slot":`...)
	body = strconv.AppendInt(body, int64(slot.Index), 10)
	body = append(body, '}')
	c.desc = body
	if err := c.chunk(handoff.FrameBatch, body, -1); err != nil {
		return err
	}
	c.handoff.Sent(slot)
	return nil
}

// frame sends one small chunk of kind with v as JSON, and fd with it (as
// SCM_RIGHTS on its first byte) unless fd is negative.
func (c *streamConn) frame(kind byte, v any, fd int) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.chunk(kind, body, fd)
}

// chunk sends one small chunk of kind with body, and fd as frame does.
func (c *streamConn) chunk(kind byte, body []byte, fd int) error {
	chunk := strconv.AppendInt(c.chunkBuf[:0], int64(len(body)+1), 16)
	chunk = append(chunk, '\r', '\n', kind)
	chunk = append(chunk, body...)
	chunk = append(chunk, '\r', '\n')
	c.chunkBuf = chunk
	if fd < 0 {
		_, err := c.conn.Write(chunk)
		return err
	}
	uc, ok := c.conn.(*net.UnixConn)
	if !ok {
		return errors.New("a hand-off through memory needs a Unix socket")
	}
	n, _, err := uc.WriteMsgUnix(chunk, unix.UnixRights(fd), nil)
	if err == nil && n < len(chunk) {
		_, err = uc.Write(chunk[n:])
	}
	return err
}

// end sends the terminal chunk: the body is complete.
func (c *streamConn) end() error {
	if err := c.flush(); err != nil {
		return err
	}
	_, err := c.conn.Write([]byte("0\r\n\r\n"))
	return err
}

// hijackStream takes the connection of a 200 response with header h and a
// chunked body.
func hijackStream(w http.ResponseWriter, h http.Header) (*streamConn, error) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriter(conn)
	_, _ = bw.WriteString("HTTP/1.1 200 OK\r\n")
	h.Set("Transfer-Encoding", "chunked")
	h.Set("Connection", "close")
	_ = h.Write(bw)
	_, _ = bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = brw // the request has no body: nothing buffered to read
	if uc, ok := conn.(*net.UnixConn); ok {
		_ = uc.SetWriteBuffer(socketBuffer)
	}
	return &streamConn{conn: conn}, nil
}
