package v1alpha1_test

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestEveryFieldHasADescription keeps `kubectl explain trainingdataset`
// useful: every field of the generated schema says what it is.
func TestEveryFieldHasADescription(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "data.shardfeed.io_trainingdatasets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	var missing []string
	var walk func(path string, s apiextensionsv1.JSONSchemaProps)
	walk = func(path string, s apiextensionsv1.JSONSchemaProps) {
		for name, p := range s.Properties {
			// metadata is ObjectMeta: kubectl explain documents it from the API.
			if p.Description == "" && path+"."+name != ".metadata" {
				missing = append(missing, path+"."+name)
			}
			walk(path+"."+name, p)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(path+"[]", *s.Items.Schema)
		}
	}
	walk("", *crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
	if len(missing) > 0 {
		t.Errorf("fields without a description (add a doc comment on the Go field): %v", missing)
	}
}
