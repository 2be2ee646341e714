package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse-dev/gatehouse/openapi"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// specMethods are the operation keys of an OpenAPI path item.
var specMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func TestOpenAPIDocument(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	for _, path := range []string{"/api/v1/openapi.json", "/docs/openapi.json"} {
		t.Run(path, func(t *testing.T) {
			res := app.do(request{method: http.MethodGet, path: path})
			var doc struct {
				OpenAPI string                                `json:"openapi"`
				Servers []struct{ URL string }                `json:"servers"`
				Paths   map[string]map[string]json.RawMessage `json:"paths"`
			}
			res.decode(t, http.StatusOK, &doc)
			if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
				t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
			}
			if len(doc.Servers) != 1 || doc.Servers[0].URL != testBaseURL {
				t.Errorf("servers = %+v, want the base URL only", doc.Servers)
			}
			ids := map[string]string{}
			for p, item := range doc.Paths {
				// The contract names two documentation aliases outside the prefixes, and issue 22
				// the hosted accept-invitation page at the default GATEHOUSE_INVITATION_URL;
				// issue 29 the problem type URIs /problems/<kind> (RFC 9457 type pages);
				// nothing else (the explorer's static assets are not operations) may be.
				alias := p == "/docs/openapi.json" || p == "/docs/api-reference" || p == "/accept-invitation/{id}" ||
					p == "/problems/{kind}"
				if !strings.HasPrefix(p, "/api/v1/") && !strings.HasPrefix(p, "/api/auth/") &&
					!strings.HasPrefix(p, "/.well-known/") && !alias {
					t.Errorf("path %s lacks a full prefix", p)
				}
				for _, m := range specMethods {
					raw, ok := item[m]
					if !ok {
						continue
					}
					var op map[string]any
					if err := json.Unmarshal(raw, &op); err != nil {
						t.Fatal(err)
					}
					id, _ := op["operationId"].(string)
					if id == "" {
						t.Errorf("%s %s has no operationId", m, p)
					} else if prev, dup := ids[id]; dup {
						t.Errorf("operationId %s used by %s and %s %s", id, prev, m, p)
					}
					ids[id] = m + " " + p
					if _, ok := op["x-permission"]; !ok {
						t.Errorf("%s %s has no x-permission", m, p)
					}
				}
			}
			etag := res.Header().Get("ETag")
			if etag == "" || !strings.Contains(res.Header().Get("Cache-Control"), "no-cache") {
				t.Fatalf("ETag %q, Cache-Control %q", etag, res.Header().Get("Cache-Control"))
			}
			again := app.do(request{method: http.MethodGet, path: path, headers: map[string]string{"If-None-Match": etag}})
			if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
				t.Errorf("conditional GET = %d with %d bytes, want 304 empty", again.Code, again.Body.Len())
			}
		})
	}
}

// TestSnapshotDiffersOnlyInServers checks the committed openapi/openapi.json against the live
// document: equal but for servers[0].url. `make generate` rewrites the snapshot.
func TestSnapshotDiffersOnlyInServers(t *testing.T) {
	committed, err := os.ReadFile("../openapi/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var pinned struct {
		Servers []struct{ URL string } `json:"servers"`
	}
	if err := json.Unmarshal(committed, &pinned); err != nil || len(pinned.Servers) != 1 || !strings.HasPrefix(pinned.Servers[0].URL, "https://") {
		t.Fatalf("snapshot servers = %+v (%v), want one https origin", pinned.Servers, err)
	}
	want, err := openapi.JSON(pinned.Servers[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, want) {
		t.Fatal("openapi/openapi.json is stale: run `make generate`")
	}
	live := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig()).
		do(request{method: http.MethodGet, path: "/api/v1/openapi.json"}).Body.Bytes()
	var a, b map[string]any
	if err := json.Unmarshal(committed, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(live, &b); err != nil {
		t.Fatal(err)
	}
	delete(a, "servers")
	delete(b, "servers")
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Error("live document and snapshot differ beyond servers")
	}
}

// TestRoutesMatchSpec checks both directions on the real app: every spec operation is routed,
// and every route but the explorer's static assets and the console is a spec operation.
func TestRoutesMatchSpec(t *testing.T) {
	app := newTestApp(t, storetest.Backends(t)[0].Open(t), testConfig())
	// Static files and browser entry points, deliberately not API operations: the explorer's
	// assets, and the admin console with the redirects that lead to it and to the explorer.
	spec := map[string]bool{"GET /docs/assets/:file": true,
		"GET /": true, "GET /docs": true, "GET /console": true, "GET /console/*": true}
	for path, item := range app.srv.doc.Paths.Map() {
		for method := range item.Operations() {
			spec[method+" "+echoPath(path)] = true
		}
	}
	routed := map[string]bool{}
	for _, r := range app.srv.Routes() {
		routed[r] = true
	}
	var missing, extra []string
	for r := range spec {
		if !routed[r] {
			missing = append(missing, r)
		}
	}
	for r := range routed {
		if !spec[r] {
			extra = append(extra, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("spec operations with no route:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(extra) > 0 {
		t.Errorf("routes not in the spec:\n  %s", strings.Join(extra, "\n  "))
	}
}

// TestBindRejectsDisagreement: the start-up check fails when a route serves no operation or an
// operation has no route, and names both.
func TestBindRejectsDisagreement(t *testing.T) {
	ops := operations{
		"GET /api/v1/things/:id": {id: "getThing"},
		"POST /api/v1/things":    {id: "createThing"},
	}
	routes := []*echo.Route{
		{Method: "GET", Path: "/api/v1/things/:id"},
		{Method: "DELETE", Path: "/api/v1/things/:id"},
		{Method: "GET", Path: "/static/:file"},
	}
	err := ops.bind(routes, map[string]bool{"GET /static/:file": true})
	if err == nil {
		t.Fatal("bind accepted a route without an operation and an operation without a route")
	}
	for _, want := range []string{"route DELETE /api/v1/things/:id serves no spec operation", "operation createThing (POST /api/v1/things) has no route"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := ops.bind(routes[:1], nil); err == nil || strings.Contains(err.Error(), "getThing") {
		t.Errorf("bind(one route) = %v, want only createThing reported", err)
	}
	routes = append(routes[:1], &echo.Route{Method: "POST", Path: "/api/v1/things"})
	if err := ops.bind(routes, nil); err != nil {
		t.Errorf("bind of agreeing routes: %v", err)
	}
}
