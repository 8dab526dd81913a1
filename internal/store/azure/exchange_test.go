package azure

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// azidentity prints the body of Entra's refusal in its error; the store
// reports the status only.
func TestARefusedExchangeCarriesNoResponseBody(t *testing.T) {
	const secret = "hunter2-from-the-body"
	s := &azStore{account: "a", container: "c", prefix: "p/"}
	err := s.describe("index.json", &azidentity.AuthenticationFailedError{
		RawResponse: &http.Response{StatusCode: 401, Body: io.NopCloser(strings.NewReader(`{"error":"invalid_client","error_description":"` + secret + `"}`))}})
	if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "Microsoft Entra ID") || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("error %q: want the service and the status, nothing of the body", err)
	}
}
