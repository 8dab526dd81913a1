package nodecache

import (
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"

	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
)

func TestOnlyAPodBoundTokenForTheAgentIsAccepted(t *testing.T) {
	user := func(name string, extra map[string]authnv1.ExtraValue) authnv1.UserInfo {
		return authnv1.UserInfo{Username: name, Extra: extra}
	}
	bound := map[string]authnv1.ExtraValue{extraPodName: {"trainer-0"}, extraNodeName: {"node-a"}}
	for _, tt := range []struct {
		name string
		st   authnv1.TokenReviewStatus
		want string // "": accepted
	}{
		{"a pod's token", authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{nodewire.Audience}, User: user("system:serviceaccount:ml:trainer", bound)}, ""},
		{"not authenticated", authnv1.TokenReviewStatus{Error: "expired"}, "expired"},
		{"another audience", authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{"shardfeed"}, User: user("system:serviceaccount:ml:trainer", bound)}, "not for audience"},
		{"a user", authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{nodewire.Audience}, User: user("alice", bound)}, "not a ServiceAccount"},
		{"a ServiceAccount without a pod", authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{nodewire.Audience}, User: user("system:serviceaccount:ml:trainer", nil)}, "not bound to a pod"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := callerOf(tt.st)
			switch {
			case tt.want == "" && (err != nil || c != Caller{Namespace: "ml", ServiceAccount: "trainer", Pod: "trainer-0", Node: "node-a"}):
				t.Fatalf("%+v, %v", c, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("%v; want %q", err, tt.want)
			}
		})
	}
}
