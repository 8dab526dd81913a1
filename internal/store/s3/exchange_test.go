package s3

import (
	"errors"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7/pkg/credentials"
)

// minio-go's STS error is the STS's message; the store reports a known
// code only.
func TestARefusedExchangeCarriesNoResponseBody(t *testing.T) {
	const secret = "hunter2-from-the-body"
	refusal := func(code string) error {
		var r credentials.ErrorResponse
		r.STSError.Code, r.STSError.Message = code, secret
		return r
	}
	tests := []struct {
		err  error
		says string
	}{
		{refusal("InvalidIdentityToken"), "AWS STS (AssumeRoleWithWebIdentity) refused the ServiceAccount token InvalidIdentityToken"},
		{refusal(secret), "refused the ServiceAccount token (check"},
		{errors.New("XML syntax error on line 1: " + secret), "refused the ServiceAccount token (check"},
	}
	for _, tt := range tests {
		err := stsError(tt.err)
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("error %q: want it to say %q and nothing of the body", err, tt.says)
		}
	}
}
