//go:build integration

package lerobot_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
)

// Datasets in LeRobot's Lance layout whose frames table is not a row per
// frame, or that hold image features, are refused naming what was found.
func TestLanceLayoutsItDoesNotReadAreRefused(t *testing.T) {
	dir, _ := golden(t)
	// The images dataset converted once, copied by the cases that read it.
	imagesLance := filepath.Join(t.TempDir(), "images-lance")
	testenv.PythonScript(t, "venv-lerobot", "test/oracle/lerobot_lance_cases.py", "convert", testenv.GoldenCopy(t, dir, "images"), imagesLance)
	for _, c := range []struct {
		name string
		make func(t *testing.T) string
		want []string
	}{
		{"a deleted frame", func(t *testing.T) string {
			root := testenv.GoldenCopy(t, dir, "multicam-lance")
			testenv.PythonScript(t, "venv-lerobot", "test/oracle/lerobot_lance_cases.py", "delete", root, "7")
			return root
		}, []string{"LeRobot's Lance layout", "frames table frames.lance/ holds 149 rows", "says 150 frames", "row N is frame N"}},
		{"a row more than the frames", func(t *testing.T) string {
			root := testenv.GoldenCopy(t, dir, "multicam-lance")
			testenv.PythonScript(t, "venv-lerobot", "test/oracle/lerobot_lance_cases.py", "append", root)
			return root
		}, []string{"holds 151 rows", "says 150 frames", "row N is frame N"}},
		{"image features", func(t *testing.T) string {
			return testenv.GoldenCopy(t, imagesLance, "")
		}, []string{"image features [observation.images.gripper observation.images.top]", "store the cameras as video"}},
		{"another storage format", func(t *testing.T) string {
			root := testenv.GoldenCopy(t, dir, "multicam-lance")
			info := filepath.Join(root, "meta", "info.json")
			b, err := os.ReadFile(info)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(info, bytes.Replace(b, []byte(`"storage_format": "lance"`), []byte(`"storage_format": "Lance"`), 1), 0o600); err != nil {
				t.Fatal(err)
			}
			return root
		}, []string{"has a frames table", `storage_format "Lance"`, `set it to "lance"`}},
		{"a feature of two axes", func(t *testing.T) string {
			out := testenv.GoldenCopy(t, imagesLance, "")
			testenv.PythonScript(t, "venv-lerobot", "test/oracle/lerobot_lance_cases.py", "no-images", out)
			return out
		}, []string{`feature "observation.joints" of shape [2 3]`, "lists of lists", "Array2D"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := c.make(t)
			st, err := stores.Open(context.Background(), store.Source{URI: "file://" + root + "/"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = formats.Default().Index(context.Background(), st, datav1alpha1.FormatLeRobot, format.IndexOptions{TempDir: t.TempDir()})
			if err == nil {
				t.Fatal("indexed")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal %q does not say %q", err, w)
				}
			}
		})
	}
}

// A frames table whose deleted rows leave a row a frame (a row appended
// and deleted) is read by its live rows, as LeRobot's Lance reader reads
// it: the items are the recording's.
func TestLanceLayoutReadsLiveRows(t *testing.T) {
	dir, m := golden(t)
	c := m.Cases["multicam-lance-plain"]
	root := testenv.GoldenCopy(t, dir, c.Dataset)
	testenv.PythonScript(t, "venv-lerobot", "test/oracle/lerobot_lance_cases.py", "append-deleted", root)
	c.root = root
	checkItems(t, dir, "multicam-lance-plain", c, m)
}
