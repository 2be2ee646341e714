package server

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// configJSON is a decoded ConfigEntry.
type configJSON struct {
	Key           string          `json:"key"`
	Value         json.RawMessage `json:"value"`
	Secret        bool            `json:"secret"`
	Masked        bool            `json:"masked"`
	Description   *string         `json:"description"`
	Version       int             `json:"version"`
	EnvironmentID string          `json:"environmentId"`
	CreatedAt     time.Time       `json:"createdAt"`
	UpdatedAt     time.Time       `json:"updatedAt"`
	ArchivedAt    *time.Time      `json:"archivedAt"`
}

// configVersionJSON is a decoded ConfigVersion.
type configVersionJSON struct {
	Version     int             `json:"version"`
	Value       json.RawMessage `json:"value"`
	Secret      bool            `json:"secret"`
	Masked      bool            `json:"masked"`
	Description *string         `json:"description"`
	CreatedBy   struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
}

// configScenario is one call of a config scenario table, run in order against shared state.
type configScenario struct {
	name   string
	who    string // a fixed role, or "stranger"
	method string
	path   string // relative to the environment's /configs
	body   string
	status int
	title  string // the problem title when status >= 400
	check  func(t *testing.T, res response)
}

// configFixture is a tenancy with the configs base path of its second environment (the first
// holds the tenancy's own fixture entry).
type configFixture struct {
	app  *testApp
	ten  tenancy
	env  string
	base string
}

func newConfigFixture(t *testing.T, b storetest.Backend) configFixture {
	return newConfigFixtureOn(t, b.Open(t))
}

func newConfigFixtureOn(t *testing.T, st *store.Store) configFixture {
	t.Helper()
	app := newTestApp(t, st, testConfig())
	ten := app.newTenancy(t)
	env := ten.project.Environments[1].ID
	return configFixture{app: app, ten: ten, env: env, base: "/api/v1/environments/" + env + "/configs"}
}

func (f configFixture) caller(who string) testUser {
	if who == "stranger" {
		return f.ten.stranger
	}
	return f.ten.members[who]
}

func (f configFixture) call(who, method, path, body string, headers ...string) response {
	r := request{method: method, path: f.base + path, body: body, headers: map[string]string{}}
	for i := 0; i+1 < len(headers); i += 2 {
		r.headers[headers[i]] = headers[i+1]
	}
	return f.app.do(f.caller(who).as(r))
}

func (f configFixture) run(t *testing.T, steps []configScenario) {
	t.Helper()
	for _, s := range steps {
		if t.Failed() {
			return // later steps depend on earlier ones
		}
		t.Run(s.name, func(t *testing.T) {
			res := f.call(s.who, s.method, s.path, s.body)
			if s.status >= 400 {
				kind := map[int]string{400: kindValidation, 403: kindForbidden, 404: kindNotFound, 409: kindConflict}[s.status]
				res.wantProblem(t, s.status, kind, s.title)
			} else if res.Code != s.status {
				t.Fatalf("status %d, want %d: %s", res.Code, s.status, res.Body)
			}
			if s.check != nil {
				s.check(t, res)
			}
		})
	}
}

func decodeEntry(t *testing.T, res response) configJSON {
	t.Helper()
	var e envelope[configJSON]
	if err := json.Unmarshal(res.Body.Bytes(), &e); err != nil {
		t.Fatalf("decode: %v: %s", err, res.Body)
	}
	return e.Data
}

func decodeEntries(t *testing.T, res response) []configJSON {
	t.Helper()
	var e envelope[[]configJSON]
	if err := json.Unmarshal(res.Body.Bytes(), &e); err != nil {
		t.Fatalf("decode: %v: %s", err, res.Body)
	}
	return e.Data
}

func decodeVersions(t *testing.T, res response) []configVersionJSON {
	t.Helper()
	var e envelope[[]configVersionJSON]
	if err := json.Unmarshal(res.Body.Bytes(), &e); err != nil {
		t.Fatalf("decode: %v: %s", err, res.Body)
	}
	return e.Data
}

// sameJSON reports whether two JSON texts hold equal values.
func sameJSON(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("value %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(a, b)
}

// wantEntry checks an entry's key, version and value: want is JSON text, or "" for a masked
// secret.
func wantEntry(t *testing.T, e configJSON, key string, version int, secret bool, want string) {
	t.Helper()
	if e.Key != key || e.Version != version || e.Secret != secret {
		t.Errorf("entry %s v%d secret=%v, want %s v%d secret=%v", e.Key, e.Version, e.Secret, key, version, secret)
	}
	if want == "" {
		if !e.Masked || string(e.Value) != "null" {
			t.Errorf("%s: value %s masked %v, want null and masked", key, e.Value, e.Masked)
		}
		return
	}
	if e.Masked || !sameJSON(t, e.Value, want) {
		t.Errorf("%s: value %s masked %v, want %s unmasked", key, e.Value, e.Masked, want)
	}
}

func wantNoStore(t *testing.T, res response) {
	t.Helper()
	if cc := res.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
}

const (
	titleRevealDenied = titlePermissionDenied
	titleArchived     = "Config entry is archived; restore it first"
)

// TestConfigLifecycle walks one environment through writes, masking, reveals by role,
// versions, archive and restore.
func TestConfigLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		f := newConfigFixture(t, b)
		var created configJSON
		f.run(t, []configScenario{
			{name: "create plain", who: RoleDeveloper, method: "PUT", path: "/FEATURE_FLAGS",
				body: `{"value":{"newCheckout":true}}`, status: 201, check: func(t *testing.T, res response) {
					created = decodeEntry(t, res)
					wantEntry(t, created, "FEATURE_FLAGS", 1, false, `{"newCheckout":true}`)
					if created.EnvironmentID != f.env || created.Description != nil || created.ArchivedAt != nil ||
						!created.CreatedAt.Equal(created.UpdatedAt) {
						t.Errorf("created %+v", created)
					}
				}},
			{name: "replace plain", who: RoleAdmin, method: "PUT", path: "/FEATURE_FLAGS",
				body: `{"value":{"newCheckout":false},"description":"Flags"}`, status: 200, check: func(t *testing.T, res response) {
					e := decodeEntry(t, res)
					wantEntry(t, e, "FEATURE_FLAGS", 2, false, `{"newCheckout":false}`)
					if e.Description == nil || *e.Description != "Flags" || !e.CreatedAt.Equal(created.CreatedAt) {
						t.Errorf("replaced %+v", e)
					}
				}},
			{name: "create secret: response masked", who: RoleDeveloper, method: "PUT", path: "/STRIPE_SECRET_KEY",
				body: `{"value":"sk_live_51H","secret":true,"description":"Processor key"}`, status: 201, check: func(t *testing.T, res response) {
					wantEntry(t, decodeEntry(t, res), "STRIPE_SECRET_KEY", 1, true, "")
					if strings.Contains(res.Body.String(), "sk_live") {
						t.Errorf("write response shows the secret: %s", res.Body)
					}
				}},
			{name: "viewer lists: secrets masked", who: RoleViewer, method: "GET", status: 200, check: func(t *testing.T, res response) {
				list := decodeEntries(t, res)
				if len(list) != 2 {
					t.Fatalf("list %s", res.Body)
				}
				wantEntry(t, list[0], "FEATURE_FLAGS", 2, false, `{"newCheckout":false}`)
				wantEntry(t, list[1], "STRIPE_SECRET_KEY", 1, true, "")
				if strings.Contains(res.Body.String(), "sk_live") {
					t.Errorf("list shows the secret: %s", res.Body)
				}
			}},
			{name: "owner reveals", who: RoleOwner, method: "GET", path: "/STRIPE_SECRET_KEY", status: 200, check: func(t *testing.T, res response) {
				wantEntry(t, decodeEntry(t, res), "STRIPE_SECRET_KEY", 1, true, `"sk_live_51H"`)
				wantNoStore(t, res)
			}},
			{name: "admin reveals", who: RoleAdmin, method: "GET", path: "/STRIPE_SECRET_KEY", status: 200, check: func(t *testing.T, res response) {
				wantEntry(t, decodeEntry(t, res), "STRIPE_SECRET_KEY", 1, true, `"sk_live_51H"`)
			}},
			{name: "developer may not reveal", who: RoleDeveloper, method: "GET", path: "/STRIPE_SECRET_KEY", status: 403, title: titleRevealDenied},
			{name: "billing may not reveal", who: RoleBilling, method: "GET", path: "/STRIPE_SECRET_KEY", status: 403, title: titleRevealDenied},
			{name: "viewer may not reveal", who: RoleViewer, method: "GET", path: "/STRIPE_SECRET_KEY", status: 403, title: titleRevealDenied},
			{name: "single reads need config:reveal even for plain values", who: RoleViewer, method: "GET", path: "/FEATURE_FLAGS", status: 403, title: titleRevealDenied},
			{name: "plain single read is not cached", who: RoleOwner, method: "GET", path: "/FEATURE_FLAGS", status: 200, check: func(t *testing.T, res response) {
				wantEntry(t, decodeEntry(t, res), "FEATURE_FLAGS", 2, false, `{"newCheckout":false}`)
				wantNoStore(t, res)
			}},
			{name: "viewer may not write", who: RoleViewer, method: "PUT", path: "/X", body: `{"value":1}`, status: 403, title: titlePermissionDenied},
			{name: "stranger sees nothing", who: "stranger", method: "GET", status: 404, title: titleNotFound},
			{name: "missing key", who: RoleOwner, method: "GET", path: "/NOPE", status: 404, title: titleNotFound},
			{name: "versions newest first", who: RoleViewer, method: "GET", path: "/FEATURE_FLAGS/versions", status: 200, check: func(t *testing.T, res response) {
				vs := decodeVersions(t, res)
				if len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 1 || vs[0].Masked ||
					!sameJSON(t, vs[0].Value, `{"newCheckout":false}`) || !sameJSON(t, vs[1].Value, `{"newCheckout":true}`) ||
					vs[0].Description == nil || *vs[0].Description != "Flags" || vs[1].Description != nil {
					t.Fatalf("versions %s", res.Body)
				}
				if vs[0].CreatedBy.Type != "user" || vs[0].CreatedBy.ID != f.ten.members[RoleAdmin].ID ||
					vs[1].CreatedBy.ID != f.ten.members[RoleDeveloper].ID {
					t.Errorf("createdBy %+v %+v", vs[0].CreatedBy, vs[1].CreatedBy)
				}
			}},
			{name: "replace secret", who: RoleOwner, method: "PUT", path: "/STRIPE_SECRET_KEY",
				body: `{"value":"sk_live_52H","secret":true}`, status: 200, check: func(t *testing.T, res response) {
					wantEntry(t, decodeEntry(t, res), "STRIPE_SECRET_KEY", 2, true, "")
				}},
			{name: "secret versions masked", who: RoleOwner, method: "GET", path: "/STRIPE_SECRET_KEY/versions", status: 200, check: func(t *testing.T, res response) {
				vs := decodeVersions(t, res)
				if len(vs) != 2 || strings.Contains(res.Body.String(), "sk_live") {
					t.Fatalf("versions %s", res.Body)
				}
				for _, v := range vs {
					if !v.Secret || !v.Masked || string(v.Value) != "null" {
						t.Errorf("version %+v not masked", v)
					}
				}
			}},
			{name: "developer archives", who: RoleDeveloper, method: "DELETE", path: "/STRIPE_SECRET_KEY", status: 200, check: func(t *testing.T, res response) {
				e := decodeEntry(t, res)
				wantEntry(t, e, "STRIPE_SECRET_KEY", 2, true, "")
				if e.ArchivedAt == nil {
					t.Errorf("archivedAt null: %s", res.Body)
				}
			}},
			{name: "archived: 404 by key", who: RoleOwner, method: "GET", path: "/STRIPE_SECRET_KEY", status: 404, title: titleNotFound},
			{name: "archived: versions 404", who: RoleOwner, method: "GET", path: "/STRIPE_SECRET_KEY/versions", status: 404, title: titleNotFound},
			{name: "archived: archive again 404", who: RoleOwner, method: "DELETE", path: "/STRIPE_SECRET_KEY", status: 404, title: titleNotFound},
			{name: "archived: put 409", who: RoleOwner, method: "PUT", path: "/STRIPE_SECRET_KEY", body: `{"value":"x","secret":true}`, status: 409, title: titleArchived},
			{name: "active list hides archived", who: RoleViewer, method: "GET", status: 200, check: func(t *testing.T, res response) {
				if l := decodeEntries(t, res); len(l) != 1 || l[0].Key != "FEATURE_FLAGS" {
					t.Errorf("list %s", res.Body)
				}
			}},
			{name: "archived list", who: RoleViewer, method: "GET", path: "?state=archived", status: 200, check: func(t *testing.T, res response) {
				l := decodeEntries(t, res)
				if len(l) != 1 || l[0].ArchivedAt == nil {
					t.Fatalf("list %s", res.Body)
				}
				wantEntry(t, l[0], "STRIPE_SECRET_KEY", 2, true, "")
			}},
			{name: "all list", who: RoleViewer, method: "GET", path: "?state=all", status: 200, check: func(t *testing.T, res response) {
				if l := decodeEntries(t, res); len(l) != 2 || l[0].Key != "FEATURE_FLAGS" || l[1].Key != "STRIPE_SECRET_KEY" {
					t.Errorf("list %s", res.Body)
				}
			}},
			{name: "bad state", who: RoleViewer, method: "GET", path: "?state=deleted", status: 400, title: titleValidation},
			{name: "viewer may not restore", who: RoleViewer, method: "POST", path: "/STRIPE_SECRET_KEY/restore", status: 403, title: titlePermissionDenied},
			{name: "developer restores", who: RoleDeveloper, method: "POST", path: "/STRIPE_SECRET_KEY/restore", status: 200, check: func(t *testing.T, res response) {
				e := decodeEntry(t, res)
				wantEntry(t, e, "STRIPE_SECRET_KEY", 2, true, "")
				if e.ArchivedAt != nil {
					t.Errorf("archivedAt %v after restore", e.ArchivedAt)
				}
			}},
			{name: "restored secret reveals", who: RoleOwner, method: "GET", path: "/STRIPE_SECRET_KEY", status: 200, check: func(t *testing.T, res response) {
				wantEntry(t, decodeEntry(t, res), "STRIPE_SECRET_KEY", 2, true, `"sk_live_52H"`)
			}},
			{name: "restore of an active entry", who: RoleOwner, method: "POST", path: "/STRIPE_SECRET_KEY/restore", status: 200},
			{name: "restore of a missing key", who: RoleOwner, method: "POST", path: "/NOPE/restore", status: 404, title: titleNotFound},
			{name: "history continues", who: RoleOwner, method: "PUT", path: "/STRIPE_SECRET_KEY", body: `{"value":"sk_live_53H","secret":true}`, status: 200, check: func(t *testing.T, res response) {
				wantEntry(t, decodeEntry(t, res), "STRIPE_SECRET_KEY", 3, true, "")
			}},
			{name: "secret becomes plain", who: RoleOwner, method: "PUT", path: "/STRIPE_SECRET_KEY", body: `{"value":"public"}`, status: 200, check: func(t *testing.T, res response) {
				wantEntry(t, decodeEntry(t, res), "STRIPE_SECRET_KEY", 4, false, `"public"`)
			}},
		})
	})
}

// TestConfigValues covers the value rules: any JSON (null included) round-trips, the 64 KiB
// limit on the encoded value, keys by the spec's pattern, and per-environment key spaces.
func TestConfigValues(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		f := newConfigFixture(t, b)
		// A string of n characters encodes to n+2 bytes.
		atLimit := `{"value":"` + strings.Repeat("a", MaxConfigValueBytes-2) + `"}`
		overLimit := `{"value":"` + strings.Repeat("a", MaxConfigValueBytes-1) + `"}`
		overLimitSecret := `{"secret":true,"value":"` + strings.Repeat("a", MaxConfigValueBytes-1) + `"}`
		// Escapes count as encoded: 13108 × "\u0001" (6 bytes each) is over the limit.
		overByEscapes := `{"value":"` + strings.Repeat(`\u0001`, 10923) + `"}`
		roundTrips := map[string]string{
			"NULL":    `null`,
			"NUM":     `-12.5e3`,
			"INT":     `9007199254740991`,
			"BOOL":    `false`,
			"ARR":     `[1,"two",null,{"x":[]}]`,
			"OBJ":     `{"nested":{"deep":[true]},"empty":{}}`,
			"STR":     `"<a href='x'>&amp;</a> ünïcode ☃"`,
			"EMPTY":   `""`,
			"a.b-c_1": `0`,
			"_lead":   `{}`,
		}
		var steps []configScenario
		for key, value := range roundTrips {
			steps = append(steps,
				configScenario{name: "put " + key, who: RoleOwner, method: "PUT", path: "/" + key, body: `{"value":` + value + `}`, status: 201,
					check: func(t *testing.T, res response) { wantEntry(t, decodeEntry(t, res), key, 1, false, value) }},
				configScenario{name: "get " + key, who: RoleOwner, method: "GET", path: "/" + key, status: 200,
					check: func(t *testing.T, res response) { wantEntry(t, decodeEntry(t, res), key, 1, false, value) }},
				configScenario{name: "put secret " + key, who: RoleOwner, method: "PUT", path: "/S" + key, body: `{"secret":true,"value":` + value + `}`, status: 201},
				configScenario{name: "reveal " + key, who: RoleOwner, method: "GET", path: "/S" + key, status: 200,
					check: func(t *testing.T, res response) { wantEntry(t, decodeEntry(t, res), "S"+key, 1, true, value) }},
			)
		}
		tooLarge := func(t *testing.T, res response) {
			p := res.wantProblem(t, 400, kindValidation, titleValidation)
			wantPaths(t, p.Errors, "body.value")
		}
		steps = append(steps,
			configScenario{name: "64 KiB encoded", who: RoleOwner, method: "PUT", path: "/BIG", body: atLimit, status: 201},
			configScenario{name: "64 KiB + 1", who: RoleOwner, method: "PUT", path: "/BIGGER", body: overLimit, status: 400, title: titleValidation, check: tooLarge},
			configScenario{name: "64 KiB + 1 secret", who: RoleOwner, method: "PUT", path: "/BIGGER", body: overLimitSecret, status: 400, title: titleValidation, check: tooLarge},
			configScenario{name: "over by escapes", who: RoleOwner, method: "PUT", path: "/BIGGER", body: overByEscapes, status: 400, title: titleValidation, check: tooLarge},
			configScenario{name: "oversized write stored nothing", who: RoleOwner, method: "GET", path: "/BIGGER", status: 404, title: titleNotFound},
			configScenario{name: "value is required", who: RoleOwner, method: "PUT", path: "/K", body: `{"secret":true}`, status: 400, title: titleValidation,
				check: func(t *testing.T, res response) {
					wantPaths(t, res.wantProblem(t, 400, kindValidation, titleValidation).Errors, "body.value")
				}},
			configScenario{name: "unknown member, long description, secret not boolean", who: RoleOwner, method: "PUT", path: "/K",
				body: `{"value":1,"extra":1,"description":"` + strings.Repeat("d", 501) + `","secret":"yes"}`, status: 400, title: titleValidation,
				check: func(t *testing.T, res response) {
					wantPaths(t, res.wantProblem(t, 400, kindValidation, titleValidation).Errors, "body.extra", "body.description", "body.secret")
				}},
			configScenario{name: "key must match the pattern", who: RoleOwner, method: "PUT", path: "/1BAD", body: `{"value":1}`, status: 400, title: titleValidation,
				check: func(t *testing.T, res response) {
					wantPaths(t, res.wantProblem(t, 400, kindValidation, titleValidation).Errors, "path.key")
				}},
			configScenario{name: "key too long", who: RoleOwner, method: "GET", path: "/K" + strings.Repeat("x", 128), status: 400, title: titleValidation},
		)
		f.run(t, steps)

		// The same key in another environment of the project is another entry.
		other := "/api/v1/environments/" + f.ten.project.Environments[2].ID + "/configs/NUM"
		owner := f.ten.members[RoleOwner]
		res := f.app.do(owner.as(request{method: "PUT", path: other, body: `{"value":"staging"}`}))
		if res.Code != 201 {
			t.Fatalf("other environment: %d %s", res.Code, res.Body)
		}
		if e := decodeEntry(t, f.call(RoleOwner, "GET", "/NUM", "")); !sameJSON(t, e.Value, `-12.5e3`) {
			t.Errorf("first environment's NUM = %s", e.Value)
		}
		// An environment of an organization the caller does not belong to is 404.
		theirs := f.app.newTenancy(t)
		res = f.app.do(owner.as(request{method: "GET", path: "/api/v1/environments/" + theirs.project.Environments[0].ID + "/configs"}))
		res.wantProblem(t, 404, kindNotFound, titleNotFound)
		f.app.do(owner.as(request{method: "GET", path: "/api/v1/environments/env_missing/configs"})).wantProblem(t, 404, kindNotFound, titleNotFound)
	})
}

// auditRows returns the audit entries with the given action about the fixture's environment,
// oldest first.
func auditRows(t *testing.T, f configFixture, action string) []store.AuditEntry {
	t.Helper()
	all, err := f.app.store.ListAudit(context.Background(), store.AuditFilter{ProjectID: f.ten.project.ID})
	if err != nil {
		t.Fatal(err)
	}
	var out []store.AuditEntry
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Action == action && all[i].Metadata["environmentId"] == f.env {
			out = append(out, all[i])
		}
	}
	return out
}

// TestConfigAudit: each secret reveal writes one config.reveal row carrying the response's
// request id; writes, archives and restores are audited; no row carries a value.
func TestConfigAudit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		f := newConfigFixture(t, b)
		const canary = "canary-secret-3f9a"
		if r := f.call(RoleAdmin, "PUT", "/DB_PASSWORD", `{"value":"`+canary+`","secret":true}`); r.Code != 201 {
			t.Fatalf("put: %d %s", r.Code, r.Body)
		}
		if r := f.call(RoleAdmin, "PUT", "/PLAIN", `{"value":"not-a-secret"}`); r.Code != 201 {
			t.Fatalf("put: %d %s", r.Code, r.Body)
		}
		first := f.call(RoleOwner, "GET", "/DB_PASSWORD", "", "X-Request-Id", "reveal-one")
		second := f.call(RoleAdmin, "GET", "/DB_PASSWORD", "")
		for _, r := range []response{first, second} {
			wantEntry(t, decodeEntry(t, r), "DB_PASSWORD", 1, true, `"`+canary+`"`)
		}
		// Plain reads, lists, versions and refused reveals are not reveals.
		f.call(RoleOwner, "GET", "/PLAIN", "")
		f.call(RoleViewer, "GET", "", "")
		f.call(RoleViewer, "GET", "/DB_PASSWORD/versions", "")
		f.call(RoleDeveloper, "GET", "/DB_PASSWORD", "").wantProblem(t, 403, kindForbidden, titlePermissionDenied)

		reveals := auditRows(t, f, "config.reveal")
		if len(reveals) != 2 {
			t.Fatalf("%d config.reveal rows, want 2: %+v", len(reveals), reveals)
		}
		wantActors := []string{f.ten.members[RoleOwner].ID, f.ten.members[RoleAdmin].ID}
		for i, r := range []response{first, second} {
			a := reveals[i]
			if a.RequestID != r.Header().Get("X-Request-Id") || a.ActorType != store.ActorUser || a.ActorID != wantActors[i] ||
				a.TargetType != "config_entry" || a.TargetID == "" || a.OrganizationID != f.ten.org.ID || a.ProjectID != f.ten.project.ID {
				t.Errorf("reveal %d: %+v (request id %q)", i, a, r.Header().Get("X-Request-Id"))
			}
			if a.Metadata["key"] != "DB_PASSWORD" || a.Metadata["environmentId"] != f.env || a.Metadata["version"] != 1.0 {
				t.Errorf("reveal %d metadata %v", i, a.Metadata)
			}
		}
		if reveals[0].RequestID != "reveal-one" {
			t.Errorf("request id %q, want the caller's", reveals[0].RequestID)
		}

		f.call(RoleDeveloper, "DELETE", "/DB_PASSWORD", "")
		f.call(RoleDeveloper, "POST", "/DB_PASSWORD/restore", "")
		updates := auditRows(t, f, "config.update")
		if len(updates) != 2 {
			t.Fatalf("config.update rows: %+v", updates)
		}
		if md := updates[0].Metadata; !reflect.DeepEqual(md, map[string]any{"key": "DB_PASSWORD", "environmentId": f.env, "version": 1.0, "secret": true}) {
			t.Errorf("config.update metadata %v", md)
		}
		if n := len(auditRows(t, f, "config.archive")) + len(auditRows(t, f, "config.restore")); n != 2 {
			t.Errorf("%d archive/restore rows, want 2", n)
		}
		all, _ := f.app.store.ListAudit(context.Background(), store.AuditFilter{ProjectID: f.ten.project.ID})
		for _, a := range all {
			if b, _ := json.Marshal(a); strings.Contains(string(b), canary) || strings.Contains(string(b), "not-a-secret") {
				t.Errorf("audit row carries a value: %s", b)
			}
		}
	})
}
