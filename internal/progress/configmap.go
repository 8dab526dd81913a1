package progress

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/shardfeed/shardfeed/internal/configmaps"
)

// ConfigMapStore keeps the state in the job's state ConfigMap, updated
// with compare-and-swap on its resourceVersion: writers in several
// processes (the operator's replicas) never lose each other's updates.
// It reads and writes only a ConfigMap shardfeed created (labelled
// app.kubernetes.io/managed-by: shardfeed): one of the same name made by
// someone else is refused, never adopted.
type ConfigMapStore struct {
	client    corev1client.ConfigMapsGetter
	namespace string
	name      string
	labels    map[string]string
	// Owner, if set, owns a ConfigMap the store creates (the dataset: the
	// state goes with it).
	Owner *metav1.OwnerReference
	// MustExist refuses to create a missing state (ErrNoState): the
	// operator creates it when it admits the job's first pod.
	MustExist bool
	// Outage bounds how long a read or write waits for an API server that
	// does not answer (a restart, an upgrade), retrying with backoff.
	Outage time.Duration
}

// maxConflicts bounds the retries of an update that lost a race.
const maxConflicts = 10

// NewConfigMapStore returns the store of job's state for dataset.
func NewConfigMapStore(client corev1client.ConfigMapsGetter, namespace, dataset, job string) *ConfigMapStore {
	return &ConfigMapStore{
		client: client, namespace: namespace, name: configmaps.StateName(dataset, job),
		labels: configmaps.JobLabels(dataset, job),
		Outage: 2 * time.Minute,
	}
}

// ErrNoState is the error of a job without a state ConfigMap (MustExist).
var ErrNoState = errors.New("no state")

// NotOwnedError is a ConfigMap of the state's name that shardfeed did
// not create.
type NotOwnedError struct{ Where string }

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("%s exists but was not created by shardfeed (it lacks the label %s=%s): shardfeed never adopts it; delete or rename it",
		e.Where, configmaps.LabelManagedBy, configmaps.ManagedBy)
}

// owned refuses a ConfigMap shardfeed did not create.
func (c *ConfigMapStore) owned(cm *corev1.ConfigMap) error {
	if cm.Labels[configmaps.LabelManagedBy] != configmaps.ManagedBy {
		return &NotOwnedError{Where: c.where()}
	}
	return nil
}

// transient reports whether err is the API server being away or
// overloaded rather than an answer: no status (connection refused or
// reset, EOF, timeout), 429, 500, 503 or 504.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	return apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}

// patiently runs op until it succeeds, fails with an answer, or the API
// server has been away for c.Outage.
func (c *ConfigMapStore) patiently(ctx context.Context, op func() error) error {
	deadline := time.Now().Add(c.Outage)
	wait := 200 * time.Millisecond
	for {
		err := op()
		if err == nil || !transient(err) || !time.Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (c *ConfigMapStore) where() string { return fmt.Sprintf("ConfigMap %s/%s", c.namespace, c.name) }

// Load implements Store.
func (c *ConfigMapStore) Load(ctx context.Context) (*configmaps.State, error) {
	var cm *corev1.ConfigMap
	err := c.patiently(ctx, func() (err error) {
		cm, err = c.client.ConfigMaps(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return &configmaps.State{Layout: configmaps.LayoutVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(), err)
	}
	if err := c.owned(cm); err != nil {
		return nil, err
	}
	s, err := configmaps.StateFromData(cm.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.where(), err)
	}
	return s, nil
}

// Update implements Store.
func (c *ConfigMapStore) Update(ctx context.Context, fn func(*configmaps.State) error) (*configmaps.State, error) {
	api := c.client.ConfigMaps(c.namespace)
	for range maxConflicts {
		var cm *corev1.ConfigMap
		err := c.patiently(ctx, func() (err error) {
			cm, err = api.Get(ctx, c.name, metav1.GetOptions{})
			return err
		})
		create := apierrors.IsNotFound(err)
		switch {
		case create && c.MustExist:
			return nil, fmt.Errorf("%w: %s does not exist", ErrNoState, c.where())
		case create:
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.namespace, Labels: c.labels}}
			if c.Owner != nil {
				cm.OwnerReferences = []metav1.OwnerReference{*c.Owner}
			}
		case err != nil:
			return nil, fmt.Errorf("%s: %w", c.where(), err)
		default:
			if err := c.owned(cm); err != nil {
				return nil, err
			}
		}
		s, err := configmaps.StateFromData(cm.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.where(), err)
		}
		if err := fn(s); err != nil {
			return nil, err
		}
		data, err := configmaps.StateData(s)
		if err != nil {
			return nil, err
		}
		if !create && cm.Data[configmaps.KeyState] == data[configmaps.KeyState] {
			return s, nil // nothing changed: no write
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		for k, v := range data {
			cm.Data[k] = v
		}
		err = c.patiently(ctx, func() (err error) {
			if create {
				_, err = api.Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager})
			} else {
				_, err = api.Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager})
			}
			return err
		})
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue // another pod wrote first: apply fn to its state
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.where(), err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("%s: %d conflicting updates in a row; try again", c.where(), maxConflicts)
}

// FieldManager is the field owner of the sidecar's writes.
const FieldManager = "shardfeed-sidecar"
