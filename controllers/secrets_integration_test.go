//go:build integration

package controllers_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// syncBuffer is a bytes.Buffer the manager's goroutines can log into.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestIntegrationNoSecretValueInStatusEventsConfigMapsOrLogs reconciles
// datasets whose credentials are wrong and right, and then looks for the
// Secrets' values everywhere the operator writes: the datasets' status,
// the namespace's events and ConfigMaps, and the manager's logs (debug
// level). None may hold them.
func TestIntegrationNoSecretValueInStatusEventsConfigMapsOrLogs(t *testing.T) {
	logs := &syncBuffer{}
	startManagerLogging(t, logr.FromSlogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.Level(-10)})))
	ctx := context.Background()
	uri, _ := mdsStream(t, 300)
	ns := apiServer.Namespace(t)
	wrongKey, wrongSecret := "AKIAWRONG"+randomHex(t), "wrong-secret-"+randomHex(t)
	credentialsSecret(t, ns, "wrong", wrongKey, wrongSecret)
	credentialsSecret(t, ns, "right", minioServer.AccessKey, minioServer.SecretKey)
	bad, good := dataset(ns, uri, "wrong", 2, 4), dataset(ns, uri, "right", 2, 4)
	bad.Name, good.Name = "bad", "good"
	for _, ds := range []*datav1alpha1.TrainingDataset{bad, good} {
		if err := apiServer.Client.Create(ctx, ds); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, client.ObjectKeyFromObject(bad), "Degraded by the wrong credentials", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	waitFor(t, client.ObjectKeyFromObject(good), "Ready", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	})

	written := map[string]any{}
	var datasets datav1alpha1.TrainingDatasetList
	var events eventsv1.EventList
	var cms corev1.ConfigMapList
	for what, list := range map[string]client.ObjectList{"datasets": &datasets, "events": &events, "configmaps": &cms} {
		if err := apiServer.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		written[what] = list
	}
	if len(events.Items) == 0 || len(cms.Items) == 0 {
		t.Fatalf("found %d events and %d ConfigMaps: the test looks at nothing", len(events.Items), len(cms.Items))
	}
	dump, err := json.Marshal(written)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "Index unreachable") {
		t.Fatalf("the manager did not log the failed read, so the logs prove nothing: %q", logs.String())
	}
	for name, value := range map[string]string{"wrong access key": wrongKey, "wrong secret key": wrongSecret,
		"MinIO's access key": minioServer.AccessKey, "MinIO's secret key": minioServer.SecretKey} {
		if strings.Contains(string(dump), value) {
			t.Errorf("the %s is in the datasets, events or ConfigMaps of the namespace", name)
		}
		if strings.Contains(logs.String(), value) {
			t.Errorf("the %s is in the manager's logs", name)
		}
	}
}

func randomHex(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return strings.ToUpper(hex.EncodeToString(b))
}

// TestIntegrationNoResponseBodyInStatusEventsOrLogsForAnyStore: for each
// store, an endpoint of the author's choosing answers every request with a
// 400 whose body (in the store's own error format, which its SDK keeps in
// its errors) holds a secret of the endpoint's network. The dataset's
// status and the namespace's events carry the HTTP status; nothing of the
// body reaches them or the manager's logs.
func TestIntegrationNoResponseBodyInStatusEventsOrLogsForAnyStore(t *testing.T) {
	const leak = "internal-admin-db_password=hunter2"
	leaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/storage/v1/"), r.Header.Get("x-goog-api-client") != "":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error": {"code": 400, "message": "` + leak + `", "errors": [{"reason": "` + leak + `", "message": "` + leak + `"}]}}`))
		case r.Header.Get("x-ms-version") != "":
			w.Header().Set("x-ms-error-code", "InvalidQueryParameterValue")
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="utf-8"?><Error><Code>InvalidQueryParameterValue</Code><Message>` + leak + `</Message></Error>`))
		default:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidRequest</Code><Message>` + leak + `</Message><Resource>` + leak + `</Resource></Error>`))
		}
	}))
	t.Cleanup(leaky.Close)
	logs := &syncBuffer{}
	startManagerLogging(t, logr.FromSlogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.Level(-10)})))
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	// Azure needs a key to sign with; the emulator-style endpoints of GCS
	// and S3 read anonymously in the ambient policy of these tests.
	if err := apiServer.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "azure", Namespace: ns},
		Data: map[string][]byte{"AZURE_STORAGE_SAS_TOKEN": []byte("sv=2024-01-01&sig=x")}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, uri, secret string }{
		{"s3", "s3://leaky/web/", ""},
		{"gs", "gs://leaky/web/", ""},
		{"az", "az://leaky/leaky/web/", "azure"},
	} {
		ds := dataset(ns, tc.uri, tc.secret, 2, 4)
		ds.Name = "leaky-" + tc.name
		ds.Spec.Streams[0].Source.Endpoint = leaky.URL
		if err := apiServer.Client.Create(ctx, ds); err != nil {
			t.Fatal(err)
		}
		got := waitFor(t, client.ObjectKeyFromObject(ds), "Degraded by the leaky endpoint", func(d *datav1alpha1.TrainingDataset) bool {
			c := condition(d, datav1alpha1.ConditionDegraded)
			return c != nil && c.Status == metav1.ConditionTrue
		})
		if c := condition(got, datav1alpha1.ConditionDegraded); !strings.Contains(c.Message, "HTTP 400") {
			t.Errorf("%s: the condition does not give the status: %s", tc.name, c.Message)
		}
	}
	var datasets datav1alpha1.TrainingDatasetList
	var events eventsv1.EventList
	for _, list := range []client.ObjectList{&datasets, &events} {
		if err := apiServer.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	if len(events.Items) < 3 {
		t.Fatalf("found %d events: the test looks at too little", len(events.Items))
	}
	for what, text := range map[string]string{"status": fmt.Sprint(datasets.Items), "events": fmt.Sprint(events.Items), "logs": logs.String()} {
		if strings.Contains(text, "hunter2") {
			t.Errorf("the endpoint's response body reached the %s", what)
		}
	}
}
