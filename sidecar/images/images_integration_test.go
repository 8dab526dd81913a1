//go:build integration

package images_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/sidecar/images"
)

// The decoded pixels are Pillow's (the decoder and resize training code
// uses, from PyPI in bin/venv-oracle) within a mean absolute difference of
// 2: JPEGs of every chroma subsampling, greyscale and CMYK, PNG with
// alpha, shrunk and enlarged, odd sizes. Run with -tags libjpeg, it checks
// the cgo build's decoder, and its draft mode against Pillow's
// Image.draft (the portable build decodes drafts at full size: its pixels
// are Pillow's full decode's).
func TestIntegrationDecodedPixelsAreThoseOfPillow(t *testing.T) {
	t.Logf("JPEG decoder: %s", images.JPEGDecoder)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	libjpeg := strings.HasPrefix(images.JPEGDecoder, "libjpeg")
	for _, spec := range []images.Spec{{Resize: 80, Height: 64, Width: 64}, {Resize: 224, Height: 224, Width: 200}, {Resize: 33, Height: 17, Width: 33},
		{Resize: 80, Height: 64, Width: 64, Draft: true}, {Resize: 33, Height: 17, Width: 33, Draft: true}} {
		t.Run(fmt.Sprintf("resize %d crop %dx%d draft %v", spec.Resize, spec.Height, spec.Width, spec.Draft), func(t *testing.T) {
			dir := t.TempDir()
			args := []string{filepath.Join(root, "test", "oracle", "images_oracle.py"), dir, fmt.Sprint(spec.Resize), fmt.Sprint(spec.Height), fmt.Sprint(spec.Width)}
			if spec.Draft && libjpeg {
				args = append(args, "draft")
			}
			cmd := exec.Command(filepath.Join(root, "bin", "venv-oracle", "bin", "python"), args...)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("images_oracle.py: %v", err)
			}
			names := strings.Fields(string(out))
			if len(names) < 20 {
				t.Fatalf("the oracle wrote %d images", len(names))
			}
			d := images.NewDecoder(spec)
			got := make([]byte, spec.Bytes())
			for _, name := range names {
				src, err := os.ReadFile(filepath.Join(dir, name+".img"))
				if err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(filepath.Join(dir, name+".rgb"))
				if err != nil {
					t.Fatal(err)
				}
				if err := d.Decode(got, src); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				mad, worst := diff(got, want)
				if mad > 2 {
					t.Errorf("%s: mean absolute difference from Pillow %.3f (largest %d), want at most 2", name, mad, worst)
				}
				t.Logf("%s: mean absolute difference %.3f, largest %d", name, mad, worst)
				if spec.Draft && libjpeg && strings.HasPrefix(name, "jpeg-640x427") {
					// The draft was decoded smaller: its pixels are not the full decode's.
					full := make([]byte, spec.Bytes())
					whole := spec
					whole.Draft = false
					if err := images.NewDecoder(whole).Decode(full, src); err != nil {
						t.Fatal(err)
					}
					if mad, _ := diff(got, full); mad < 0.5 {
						t.Errorf("%s: the draft is the full decode within %.3f: it was not decoded smaller", name, mad)
					}
				}
				// A PNG decodes losslessly, and a JPEG through libjpeg-turbo (the
				// cgo build) exactly as Pillow's: only the resize can differ, by
				// the rounding of the pass Pillow runs first (it picks the order).
				exact := strings.HasPrefix(name, "png-") || libjpeg
				if exact && (mad > 0.25 || worst > 1) {
					t.Errorf("%s: resized pixels differ from Pillow's by %.3f on average, %d at most; want rounding only", name, mad, worst)
				}
			}
		})
	}
}

func diff(a, b []byte) (float64, int) {
	if len(a) != len(b) {
		return 255, 255
	}
	sum, worst := 0, 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		d = max(d, -d)
		sum += d
		worst = max(worst, d)
	}
	return float64(sum) / float64(len(a)), worst
}
