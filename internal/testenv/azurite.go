package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
)

// Azurite's well-known development account (public in Azure's docs).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Azurite is a running Azurite blob server (bin/azurite-blob), in memory.
type Azurite struct {
	// URL is http://127.0.0.1:port, a stream's source.endpoint.
	URL        string
	cmd        *exec.Cmd
	dir        string
	containers atomic.Int64
}

// StartAzurite starts the blob server on a free port of 127.0.0.1 and
// waits until it answers. It dies with the test binary.
func StartAzurite(ctx context.Context) (*Azurite, error) {
	bin, err := binary("azurite-blob")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "shardfeed-azurite-")
	if err != nil {
		return nil, err
	}
	a := &Azurite{URL: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
	log, err := os.Create(filepath.Join(dir, "azurite.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = log.Close() }()
	a.cmd = exec.Command(bin, "--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port), "--inMemoryPersistence",
		"--silent", "--skipApiVersionCheck", "--disableTelemetry", "--disableProductStyleUrl")
	a.cmd.Dir = dir // its debug files, if any
	a.cmd.Stdout, a.cmd.Stderr = log, log
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/"+AzuriteAccount+"?comp=list", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			return a, nil // any answer: it serves (an unsigned request is refused)
		}
		select {
		case <-ctx.Done():
			_ = a.Stop()
			out, _ := os.ReadFile(filepath.Join(dir, "azurite.log"))
			return nil, fmt.Errorf("azurite did not answer within 60 s: %w\n%s", err, out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Container creates a fresh container for one test.
func (a *Azurite) Container(t testing.TB) string {
	t.Helper()
	key, err := azblob.NewSharedKeyCredential(AzuriteAccount, AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := azblob.NewClientWithSharedKeyCredential(a.URL+"/"+AzuriteAccount+"/", key, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := bucketName(t.Name(), a.containers.Add(1))
	if _, err := c.CreateContainer(context.Background(), name, nil); err != nil {
		t.Fatalf("creating container %s: %v", name, err)
	}
	return name
}

// Stop kills the server and removes its directory.
func (a *Azurite) Stop() error {
	if a.cmd != nil && a.cmd.Process != nil {
		_ = a.cmd.Process.Kill()
		_ = a.cmd.Wait()
	}
	return os.RemoveAll(a.dir)
}
