package progressapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Every token the operator does not know once cost a TokenReview, without
// bound: a refused token is now remembered for a while, and a source's
// unknown tokens are reviewed at a bounded rate (429 beyond it), another
// source's unaffected.
func TestUnknownTokensCostBoundedTokenReviews(t *testing.T) {
	var reviews atomic.Int64
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		reviews.Add(1)
		return true, &authenticationv1.TokenReview{}, nil // not authenticated
	})
	e := &Endpoint{Reviews: cs.AuthenticationV1().TokenReviews(), Log: logr.Discard()}
	ask := func(token, from string) error {
		req := httptest.NewRequest(http.MethodPost, "/progress/v1/commit", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.RemoteAddr = from
		_, err := e.authenticate(context.Background(), req)
		return err
	}
	status := func(err error) int {
		var ee *endpointError
		if errors.As(err, &ee) {
			return ee.status
		}
		return 0
	}

	for range 100 {
		if err := ask("the-same-bad-token", "10.0.0.1:1234"); status(err) != http.StatusUnauthorized {
			t.Fatalf("a bad token: %v, want 401", err)
		}
	}
	if n := reviews.Load(); n != 1 {
		t.Fatalf("one bad token sent 100 times cost %d TokenReviews, want 1", n)
	}

	limited := 0
	for i := range 500 {
		switch err := ask(fmt.Sprint("token-", i), fmt.Sprintf("10.0.0.2:%d", 2000+i)); status(err) {
		case http.StatusTooManyRequests:
			limited++
		case http.StatusUnauthorized:
		default:
			t.Fatalf("token %d: %v", i, err)
		}
	}
	if n := reviews.Load() - 1; n > reviewBurst+reviewsPerSecond || limited < 500-reviewBurst-reviewsPerSecond {
		t.Fatalf("500 unknown tokens from one source: %d TokenReviews, %d refused with 429 (want at most %d reviews)", n, limited, reviewBurst+reviewsPerSecond)
	}
	if err := ask("another-source", "10.0.0.3:1"); status(err) != http.StatusUnauthorized {
		t.Fatalf("another source: %v, want its token reviewed (401)", err)
	}
}
