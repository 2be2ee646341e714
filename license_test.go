package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestLicenseAgrees: LICENSE is the Apache License 2.0 text, and the spec's info.license and
// package.json name the same license.
func TestLicenseAgrees(t *testing.T) {
	text, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Apache License\n                           Version 2.0, January 2004",
		"TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "END OF TERMS AND CONDITIONS",
		"http://www.apache.org/licenses/LICENSE-2.0"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("LICENSE lacks %q", want)
		}
	}
	doc, err := openapi3.NewLoader().LoadFromFile("openapi/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if l := doc.Info.License; l == nil || l.Name != "Apache-2.0" || l.Identifier != "Apache-2.0" {
		t.Errorf("spec info.license = %+v, want name and identifier Apache-2.0", l)
	}
	raw, err := os.ReadFile("package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct{ License string }
	if err := json.Unmarshal(raw, &pkg); err != nil || pkg.License != "Apache-2.0" {
		t.Errorf("package.json license = %q (%v), want Apache-2.0", pkg.License, err)
	}
}
