//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

// getObject reads an object of bucket, or nil where there is none.
func getObject(t *testing.T, bucket, key string) []byte {
	t.Helper()
	obj, err := minioServer.Client.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
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
			want := getObject(t, bucket, "web/_shardfeed/index.json")
			if len(want) == 0 {
				t.Fatal("one run wrote no index")
			}
			for _, n := range []int{1, 2, 3, 8} {
				if _, err := minioServer.Client.PutObject(ctx, bucket, "web/_shardfeed/index.json", bytes.NewReader(nil), 0, minio.PutObjectOptions{}); err != nil {
					t.Fatal(err)
				}
				inParts(t, args, n)
				if got := getObject(t, bucket, "web/_shardfeed/index.json"); !bytes.Equal(got, want) {
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
