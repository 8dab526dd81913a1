package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MinIO is a real MinIO server on 127.0.0.1 with its own credentials and data
// directory.
type MinIO struct {
	// Endpoint is host:port of the S3 API (plain HTTP).
	Endpoint string
	// AccessKey and SecretKey are the root credentials.
	AccessKey, SecretKey string
	// Region is the region buckets are made in.
	Region string
	// Client is a client with the root credentials.
	Client *minio.Client

	bin     string
	console string // host:port of the console, which MinIO insists on
	cmd     *exec.Cmd
	exited  chan struct{}
	dir     string
	buckets atomic.Int64
}

const minioStartTimeout = 60 * time.Second

// StartMinIO starts bin/minio on a free port of 127.0.0.1 with a fresh data
// directory and waits until it serves requests.
func StartMinIO(ctx context.Context) (*MinIO, error) {
	return StartMinIOAt(ctx, "127.0.0.1")
}

// StartMinIOAt is StartMinIO on another local address (the local cluster's
// node address, which its pods reach).
func StartMinIOAt(ctx context.Context, host string) (*MinIO, error) {
	bin, err := binary("minio")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "shardfeed-minio-")
	if err != nil {
		return nil, err
	}
	m := &MinIO{
		AccessKey: "shardfeed-" + randomHex(4),
		SecretKey: randomHex(20),
		Region:    "us-east-1",
		bin:       bin,
		dir:       dir,
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	consolePort, err := freePort()
	if err != nil {
		return nil, err
	}
	m.Endpoint = net.JoinHostPort(host, strconv.Itoa(port))
	m.console = fmt.Sprintf("127.0.0.1:%d", consolePort)
	m.Client, err = minio.New(m.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(m.AccessKey, m.SecretKey, ""),
		Region: m.Region,
	})
	if err != nil {
		return nil, err
	}
	if err := m.start(ctx); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

// start runs the server on m's address and data directory.
func (m *MinIO) start(ctx context.Context) error {
	logFile, err := os.OpenFile(filepath.Join(m.dir, "minio.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()

	m.exited = make(chan struct{})
	m.cmd = exec.Command(m.bin, "server", "--quiet",
		"--address", m.Endpoint, "--console-address", m.console,
		filepath.Join(m.dir, "data"))
	m.cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+m.AccessKey, "MINIO_ROOT_PASSWORD="+m.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off")
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	// The server dies with the test binary even when it is killed (go test
	// -timeout), so no MinIO outlives the tests.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", m.bin, err)
	}
	exited := m.exited
	go func() { _ = m.cmd.Wait(); close(exited) }()
	return m.waitReady(ctx)
}

// Kill stops the server at once (SIGKILL), keeping its data, as a crash
// or a network cut would; Restart brings it back.
func (m *MinIO) Kill() {
	if m.cmd != nil && m.cmd.Process != nil {
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
}

// Restart starts a killed server again on the same address and data.
func (m *MinIO) Restart(ctx context.Context) error {
	select {
	case <-m.exited:
	default:
		return fmt.Errorf("MinIO at %s is still running: Kill it first", m.Endpoint)
	}
	return m.start(ctx)
}

func (m *MinIO) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, minioStartTimeout)
	defer cancel()
	url := "http://" + m.Endpoint + "/minio/health/ready"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-m.exited:
			return fmt.Errorf("MinIO exited during start-up; its log:\n%s", m.logTail())
		case <-ctx.Done():
			return fmt.Errorf("MinIO not ready at %s after %s; its log:\n%s", url, minioStartTimeout, m.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *MinIO) logTail() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "minio.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// Stop stops the server and removes its data.
func (m *MinIO) Stop() error {
	if m.cmd != nil && m.cmd.Process != nil {
		select {
		case <-m.exited:
		default:
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-m.exited:
			case <-time.After(10 * time.Second):
				_ = m.cmd.Process.Kill()
				<-m.exited
			}
		}
	}
	return os.RemoveAll(m.dir)
}

// Bucket creates a bucket for one test and removes it, with everything in it,
// when the test ends.
func (m *MinIO) Bucket(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	name := bucketName(t.Name(), m.buckets.Add(1))
	if err := m.Client.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: m.Region}); err != nil {
		t.Fatalf("creating bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := m.removeBucket(ctx, name); err != nil {
			t.Errorf("removing bucket %s: %v", name, err)
		}
	})
	return name
}

func (m *MinIO) removeBucket(ctx context.Context, name string) error {
	objects := m.Client.ListObjects(ctx, name, minio.ListObjectsOptions{Recursive: true})
	for res := range m.Client.RemoveObjects(ctx, name, objects, minio.RemoveObjectsOptions{}) {
		if res.Err != nil {
			return res.Err
		}
	}
	return m.Client.RemoveBucket(ctx, name)
}

var notBucketChars = regexp.MustCompile(`[^a-z0-9-]+`)

// bucketName derives a valid, unique S3 bucket name from a test name.
func bucketName(testName string, n int64) string {
	base := strings.Trim(notBucketChars.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	suffix := fmt.Sprintf("-%d", n)
	if max := 63 - len(suffix); len(base) > max {
		base = strings.TrimRight(base[:max], "-")
	}
	if len(base) < 3 {
		base = "test" + base
	}
	return base + suffix
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("listener has no TCP address")
	}
	return addr.Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// CredentialsDir writes the server's root credentials as a mounted Secret
// holds them (files AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) into a
// directory removed after the test.
func (m *MinIO) CredentialsDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range map[string]string{"AWS_ACCESS_KEY_ID": m.AccessKey, "AWS_SECRET_ACCESS_KEY": m.SecretKey} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// URL is the server's endpoint as a source's endpoint field takes it.
func (m *MinIO) URL() string { return "http://" + m.Endpoint }

// RunWithMinIO is a TestMain body: it starts a MinIO into *server, runs the
// package's tests and benchmarks, and stops the server.
func RunWithMinIO(m *testing.M, server **MinIO) int {
	s, err := StartMinIO(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*server = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}
