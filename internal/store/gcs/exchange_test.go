package gcs

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"cloud.google.com/go/auth"
)

// Google's auth library prints the body of a refused token exchange in its
// error; the store reports the status and a known OAuth code only.
func TestARefusedExchangeCarriesNoResponseBody(t *testing.T) {
	const secret = "hunter2-from-the-body"
	s := &gcsStore{bucket: "b", prefix: "p/"}
	tests := []struct {
		body string
		says string
	}{
		{`{"error":"invalid_grant","error_description":"` + secret + `"}`, "HTTP 400 invalid_grant (check"},
		{`{"error":"` + secret + `"}`, "HTTP 400 (check"},
		{secret, "HTTP 400 (check"},
	}
	for _, tt := range tests {
		err := s.describe("index.json", &auth.Error{Body: []byte(tt.body),
			Response: &http.Response{StatusCode: 400, Body: io.NopCloser(strings.NewReader(tt.body))}})
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), "gs://b/p/index.json") {
			t.Errorf("error %q: want it to say %q and nothing of the body", err, tt.says)
		}
	}
}
