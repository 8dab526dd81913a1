package progress

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestTransientTellsAnAbsentAPIServerFromAnAnswer(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("Get \"https://10.0.0.1/api\": dial tcp: %w", syscall.ECONNREFUSED), true},
		{"service unavailable", apierrors.NewServiceUnavailable("restarting"), true},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), true},
		{"server timeout", apierrors.NewServerTimeout(cm, "get", 1), true},
		{"internal error", apierrors.NewInternalError(errors.New("etcd")), true},
		{"not found", apierrors.NewNotFound(cm, "x"), false},
		{"forbidden", apierrors.NewForbidden(cm, "x", errors.New("RBAC")), false},
		{"conflict", apierrors.NewConflict(cm, "x", errors.New("stale")), false},
		{"invalid", apierrors.NewBadRequest("too large"), false},
		{"cancelled", context.Canceled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := transient(tt.err); got != tt.want {
				t.Errorf("transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
