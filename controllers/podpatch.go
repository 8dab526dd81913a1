package controllers

import (
	"reflect"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// podPatch is the JSON patch that turns pod into mutated, field by field
// of the pod's metadata and spec: each field that differs is replaced
// whole. Comparing the two pods as generic JSON (jsonpatch.CreatePatch,
// admission.PatchResponseFromRaw) was the largest part of an admission's
// CPU at a cluster's scale; and a field this API version does not know,
// which the decoded pod lost, is left as it is unless its parent changed.
// ok is false when anything outside the metadata and spec differs.
func podPatch(pod, mutated *corev1.Pod) (ops []jsonpatch.JsonPatchOperation, ok bool) {
	if !equality.Semantic.DeepEqual(pod.TypeMeta, mutated.TypeMeta) || !equality.Semantic.DeepEqual(pod.Status, mutated.Status) {
		return nil, false
	}
	for _, part := range []struct {
		path     string
		old, new reflect.Value
	}{
		{"/metadata/", reflect.ValueOf(pod.ObjectMeta), reflect.ValueOf(mutated.ObjectMeta)},
		{"/spec/", reflect.ValueOf(pod.Spec), reflect.ValueOf(mutated.Spec)},
	} {
		for i := range part.old.NumField() {
			old, cur := part.old.Field(i), part.new.Field(i)
			if equality.Semantic.DeepEqual(old.Interface(), cur.Interface()) {
				continue
			}
			name, opts, _ := strings.Cut(part.old.Type().Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" {
				return nil, false // not a field of the JSON object
			}
			omitted := func(v reflect.Value) bool { return strings.Contains(opts, "omitempty") && emptyJSON(v) }
			switch {
			case omitted(cur) && omitted(old):
				// Neither is in the JSON: nothing to change.
			case omitted(cur):
				ops = append(ops, jsonpatch.NewOperation("remove", part.path+name, nil))
			default:
				// add replaces a member that is there.
				ops = append(ops, jsonpatch.NewOperation("add", part.path+name, cur.Interface()))
			}
		}
	}
	return ops, true
}

// emptyJSON is encoding/json's test of a value omitempty leaves out.
func emptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
