package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// IcebergREST is a running Apache Iceberg REST catalog server
// (bin/iceberg-rest.jar, the test-fixtures server of iceberg-open-api): a
// JDBC catalog in SQLite memory behind the REST API, whose tables are
// written through S3FileIO into a MinIO bucket.
type IcebergREST struct {
	// URI is http://127.0.0.1:port, a REST catalog's uri.
	URI  string
	proc *serverProcess
}

// StartIcebergREST starts a catalog whose new tables go under warehouse
// (s3://bucket/prefix) in m, on a free port, and waits until it answers.
// Jetty listens on every interface: the catalog holds test tables only.
// It dies with the test binary.
func StartIcebergREST(ctx context.Context, m *MinIO, warehouse string) (*IcebergREST, error) {
	jar, err := binary("iceberg-rest.jar")
	if err != nil {
		return nil, err
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java is missing (%w): run 'make tools' (Debian's openjdk-17-jre-headless)", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &IcebergREST{URI: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	// The JVM's temporary files (sqlite-jdbc unpacks its native library
	// there, and a killed server never removes it) go in the server's own
	// directory, removed with it; no hsperfdata in /tmp either.
	cmd := exec.Command(java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Djava.io.tmpdir=.", "-jar", jar)
	// The server reads its catalog's properties from CATALOG_* variables:
	// "__" is "-" and "_" is ".", so CATALOG_S3_PATH__STYLE__ACCESS is
	// s3.path-style-access.
	cmd.Env = append(os.Environ(),
		"CATALOG_REST_PORT="+strconv.Itoa(port),
		"CATALOG_WAREHOUSE="+warehouse,
		"CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO",
		"CATALOG_S3_ENDPOINT="+m.URL(),
		"CATALOG_S3_PATH__STYLE__ACCESS=true",
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID="+m.AccessKey,
		"AWS_SECRET_ACCESS_KEY="+m.SecretKey,
	)
	r.proc, err = startProcess(ctx, "iceberg-rest", cmd, 60*time.Second, r.URI+"/v1/config")
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Stop kills the server and removes its directory.
func (r *IcebergREST) Stop() error { return r.proc.stop() }
