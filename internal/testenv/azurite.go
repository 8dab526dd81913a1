package testenv

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
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
	proc       *serverProcess
	containers atomic.Int64
}

// StartAzurite starts the blob server on a free port of 127.0.0.1 and
// waits until it answers (an unsigned request is refused, which is an
// answer). It dies with the test binary.
func StartAzurite(ctx context.Context) (*Azurite, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	a := &Azurite{URL: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	a.proc, err = startServer(ctx, "azurite-blob", 60*time.Second, a.URL+"/"+AzuriteAccount+"?comp=list",
		"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port), "--inMemoryPersistence",
		"--silent", "--skipApiVersionCheck", "--disableTelemetry", "--disableProductStyleUrl")
	if err != nil {
		return nil, err
	}
	return a, nil
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
func (a *Azurite) Stop() error { return a.proc.stop() }
