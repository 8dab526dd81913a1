package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"

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
}

// flush sends what was written since the last flush as one chunk.
func (c *streamConn) flush() error {
	if c.Len() == 0 {
		return nil
	}
	c.bufs = append(c.bufs[:0], fmt.Appendf(nil, "%x\r\n", c.Len()))
	c.bufs = c.Take(c.bufs)
	c.bufs = append(c.bufs, []byte("\r\n"))
	bufs := c.bufs // WriteTo consumes its receiver
	_, err := bufs.WriteTo(c.conn)
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
