//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

// indexObject reads the index of bucket's stream web/, or nil where there
// is none.
func indexObject(t *testing.T, bucket string) []byte {
	t.Helper()
	obj, err := minioServer.Client.GetObject(context.Background(), bucket, "web/_shardfeed/index.json", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = obj.Close() }()
	var b bytes.Buffer
	if _, err := b.ReadFrom(obj); err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil
		}
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestIntegrationIndexInPartsOnMinIOEqualsOneRunAndRefusesAChangedObject(t *testing.T) {
	ctx := context.Background()
	creds := minioServer.CredentialsDir(t)
	endpoint := "http://" + minioServer.Endpoint
	cases := []struct {
		name, format string
		objects      func(i int) []byte
		flags        []string
	}{
		{"parquet", "parquet", func(i int) []byte { return parquetFile(t, i*1000, 50+i*70, 40) }, nil},
		{"jsonl", "jsonl", func(i int) []byte {
			var b strings.Builder
			for j := range 20 + i*45 {
				if i == 3 {
					fmt.Fprintf(&b, "{\"id\": %d, \"late\": %d.5}\n", j, j)
				} else {
					fmt.Fprintf(&b, "{\"id\": %d, \"t\": %q}\n", j, strings.Repeat("w", j%31))
				}
			}
			return []byte(b.String())
		}, []string{"--shard-size", "1KiB"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bucket := minioServer.Bucket(t)
			put := func(key string, data []byte) {
				if _, err := minioServer.Client.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 6 {
				put(fmt.Sprintf("web/d/part-%02d.%s", i, c.format), c.objects(i))
			}
			args := append([]string{"index", "s3://" + bucket + "/web/", "--format", c.format, "--endpoint", endpoint, "--insecure", "--credentials-dir", creds}, c.flags...)
			mustRun(t, args...)
			want := indexObject(t, bucket)
			if len(want) == 0 {
				t.Fatal("one run wrote no index")
			}
			for _, n := range []int{1, 2, 3, 8} {
				if _, err := minioServer.Client.PutObject(ctx, bucket, "web/_shardfeed/index.json", bytes.NewReader(nil), 0, minio.PutObjectOptions{}); err != nil {
					t.Fatal(err)
				}
				inParts(t, args, n)
				if got := indexObject(t, bucket); !bytes.Equal(got, want) {
					t.Fatalf("%d parts: the merged index differs from the one run's\n got %.300s\nwant %.300s", n, got, want)
				}
			}

			// The same size, other bytes: the version tag tells.
			mustRun(t, append(args, "--list-parts", "2")...)
			data := c.objects(5)
			data[len(data)/2] ^= 1
			put("web/d/part-05."+c.format, data)
			out, err := runCLI(t, append(args, "--part", "1")...)
			if err == nil || !strings.Contains(err.Error(), "part-05."+c.format) || !strings.Contains(err.Error(), "changed since the parts were listed") {
				t.Fatalf("a part whose object changed: %v\n%s", err, out)
			}
		})
	}
}

// An indexing Job's pods read the data with the stream's credentials and
// write the index with --write-credentials-dir's alone: keys that cannot
// write fail the write, keys that cannot read fail the read.
func TestIntegrationTheIndexIsWrittenWithTheWriteCredentialsAlone(t *testing.T) {
	ctx := context.Background()
	good := minioServer.CredentialsDir(t)
	bad := t.TempDir()
	for name, value := range map[string]string{"AWS_ACCESS_KEY_ID": "nobody", "AWS_SECRET_ACCESS_KEY": "not-a-secret-key"} {
		if err := os.WriteFile(filepath.Join(bad, name), []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bucket := minioServer.Bucket(t)
	data := parquetFile(t, 0, 40, 20)
	if _, err := minioServer.Client.PutObject(ctx, bucket, "web/a.parquet", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	index := func(read, write string) error {
		_, err := runCLI(t, "index", "s3://"+bucket+"/web/", "--format", "parquet", "--endpoint", "http://"+minioServer.Endpoint, "--insecure",
			"--credentials-dir", read, "--write-credentials-dir", write)
		return err
	}
	if err := index(good, bad); err == nil || indexObject(t, bucket) != nil {
		t.Fatalf("written with write credentials that cannot write: %v", err)
	}
	if err := index(bad, good); err == nil || indexObject(t, bucket) != nil {
		t.Fatalf("read with read credentials that cannot read: %v", err)
	}
	if err := index(good, good); err != nil || indexObject(t, bucket) == nil {
		t.Fatalf("read and written with good credentials: %v", err)
	}
}
