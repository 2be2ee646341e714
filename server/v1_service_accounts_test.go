package server

import (
	"context"
	"crypto/hmac"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// saKeyBody is an ApiKey as the wire carries it.
type saKeyBody struct {
	ID         string     `json:"id"`
	PublicID   string     `json:"publicId"`
	ExpiresAt  *time.Time `json:"expiresAt"`
	RevokedAt  *time.Time `json:"revokedAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
	CreatedAt  time.Time  `json:"createdAt"`
}

// saBody is a ServiceAccount as the wire carries it; APIKey only in the creation response.
type saBody struct {
	ID            string      `json:"id"`
	ProjectID     string      `json:"projectId"`
	Name          string      `json:"name"`
	Description   *string     `json:"description"`
	EnvironmentID *string     `json:"environmentId"`
	Scopes        []string    `json:"scopes"`
	DisabledAt    *time.Time  `json:"disabledAt"`
	CreatedAt     time.Time   `json:"createdAt"`
	UpdatedAt     time.Time   `json:"updatedAt"`
	Keys          []saKeyBody `json:"keys"`
	APIKey        string      `json:"apiKey"`
}

// saMinted is the body of POST .../keys.
type saMinted struct {
	Key    saKeyBody `json:"key"`
	APIKey string    `json:"apiKey"`
}

// saOpen opens a fresh migrated store of backend b together with a raw connection to the same
// database, for grepping what is really stored.
func saOpen(t *testing.T, b storetest.Backend) (*store.Store, *sql.DB) {
	t.Helper()
	ctx := context.Background()
	url := b.URL(t)
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	driver, dsn := "postgres", url
	if st.Dialect() == store.SQLite {
		driver, dsn = "sqlite", strings.TrimPrefix(url, "sqlite:")
	}
	raw, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	return st, raw
}

// saDumpDatabase returns every row of every table as text (byte columns as their raw bytes).
func saDumpDatabase(t *testing.T, raw *sql.DB, dialect store.Dialect) string {
	t.Helper()
	ctx := context.Background()
	query := `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`
	if dialect == store.SQLite {
		query = `SELECT name FROM sqlite_master WHERE type = 'table'`
	}
	var tables []string
	rows, err := raw.QueryContext(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, table := range tables {
		rows, err := raw.QueryContext(ctx, `SELECT * FROM "`+table+`"`)
		if err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("dump %s: %v", table, err)
			}
			out.WriteString(table)
			for _, v := range vals {
				out.WriteByte('|')
				if b, ok := v.([]byte); ok {
					out.Write(b)
				} else {
					fmt.Fprint(&out, v)
				}
			}
			out.WriteByte('\n')
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out.String()
}

// saCreate creates a service account as u and returns the decoded 201 body.
func saCreate(t *testing.T, app *testApp, u testUser, projectID, body string) saBody {
	t.Helper()
	var out envelope[saBody]
	app.do(u.as(request{method: "POST", path: "/api/v1/projects/" + projectID + "/service-accounts", body: body})).
		decode(t, http.StatusCreated, &out)
	return out.Data
}

// saProject adds a project to ten's organization directly in the store: a project without the
// fixtures newTenancy creates through the API, so that lists and audit logs hold only what a
// test did.
func saProject(t *testing.T, app *testApp, ten tenancy, slug string) store.Project {
	t.Helper()
	return app.NewProject(t, ten.org.ID, slug)
}

// saJSONKeys returns the sorted member names of a JSON object.
func saJSONKeys(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var (
	saAccountMembers = []string{"createdAt", "description", "disabledAt", "environmentId", "id", "keys", "name", "projectId", "scopes", "updatedAt"}
	saKeyMembers     = []string{"createdAt", "expiresAt", "id", "lastUsedAt", "publicId", "revokedAt"}
)

func TestServiceAccountLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		st, raw := saOpen(t, b)
		app := newTestApp(t, st, testConfig())
		ten := app.newTenancy(t)
		owner, admin, viewer := ten.members[RoleOwner], ten.members[RoleAdmin], ten.members[RoleViewer]
		project := saProject(t, app, ten, "lifecycle")
		base := "/api/v1/projects/" + project.ID + "/service-accounts"
		prod := project.Environments[2].ID
		expires := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)

		// Create: the key comes back once, in data.apiKey, with the first key's public id.
		res := app.do(owner.as(request{method: "POST", path: base, body: fmt.Sprintf(
			`{"name":"checkout","description":"Reads production","environmentId":%q,"scopes":["config:read","usage:write"],"expiresAt":%q}`,
			prod, expires.Format(time.RFC3339))}))
		var created envelope[saBody]
		res.decode(t, http.StatusCreated, &created)
		sa := created.Data
		if !apiKeyShape.MatchString(sa.APIKey) {
			t.Fatalf("apiKey %q does not match the ApiKeySecret pattern", sa.APIKey)
		}
		publicID, secret, ok := identity.ParseAPIKey(sa.APIKey)
		if !ok {
			t.Fatalf("ParseAPIKey refuses the minted key %q", sa.APIKey)
		}
		if !strings.HasPrefix(sa.ID, "sa_") || sa.ProjectID != project.ID || sa.Name != "checkout" ||
			sa.Description == nil || *sa.Description != "Reads production" || sa.EnvironmentID == nil || *sa.EnvironmentID != prod ||
			!slices.Equal(sa.Scopes, []string{"config:read", "usage:write"}) || sa.DisabledAt != nil ||
			!sa.UpdatedAt.Equal(sa.CreatedAt) || len(sa.Keys) != 1 {
			t.Fatalf("created %+v", sa)
		}
		first := sa.Keys[0]
		if !strings.HasPrefix(first.ID, "key_") || first.PublicID != publicID || first.ExpiresAt == nil ||
			!first.ExpiresAt.Equal(expires) || first.RevokedAt != nil || first.LastUsedAt != nil || !first.CreatedAt.Equal(sa.CreatedAt) {
			t.Fatalf("first key %+v", first)
		}
		var createdRaw struct{ Data json.RawMessage }
		_ = json.Unmarshal(res.Body.Bytes(), &createdRaw)
		if got, want := saJSONKeys(t, createdRaw.Data), append(slices.Clone(saAccountMembers), "apiKey"); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("creation members %v, want %v", got, want)
		}
		if n := strings.Count(res.Body.String(), sa.APIKey); n != 1 {
			t.Errorf("creation body carries the key %d times, want once", n)
		}

		// Only HMAC(pepper, secret) is stored, and the auth lookup finds it.
		auth, err := st.APIKeyByPublicID(context.Background(), publicID)
		if err != nil {
			t.Fatal(err)
		}
		hash := identity.HashAPIKeySecret(app.srv.apiKeyPepper, secret)
		if !hmac.Equal(hash, auth.SecretHash) || auth.KeyID != first.ID ||
			auth.AccountID != sa.ID || auth.EnvironmentID != prod || auth.OrganizationID != ten.org.ID {
			t.Fatalf("auth lookup %+v", auth)
		}

		// Mint more keys (admin may), with and without a body.
		var second, third envelope[saMinted]
		app.do(admin.as(request{method: "POST", path: base + "/" + sa.ID + "/keys"})).decode(t, http.StatusCreated, &second)
		app.do(owner.as(request{method: "POST", path: base + "/" + sa.ID + "/keys",
			body: fmt.Sprintf(`{"expiresAt":%q}`, expires.Add(time.Hour).Format(time.RFC3339))})).decode(t, http.StatusCreated, &third)
		for _, m := range []saMinted{second.Data, third.Data} {
			id, _, ok := identity.ParseAPIKey(m.APIKey)
			if !apiKeyShape.MatchString(m.APIKey) || !ok || id != m.Key.PublicID || !strings.HasPrefix(m.Key.ID, "key_") ||
				m.Key.RevokedAt != nil || m.Key.LastUsedAt != nil {
				t.Fatalf("minted %+v", m)
			}
		}
		if second.Data.Key.ExpiresAt != nil || third.Data.Key.ExpiresAt == nil || !third.Data.Key.ExpiresAt.Equal(expires.Add(time.Hour)) {
			t.Errorf("minted expiries %v, %v", second.Data.Key.ExpiresAt, third.Data.Key.ExpiresAt)
		}

		// A second account, to address keys through the wrong account.
		other := saCreate(t, app, owner, project.ID, `{"name":"batch","scopes":["*"]}`)
		if other.Description != nil || other.EnvironmentID != nil || !slices.Equal(other.Scopes, []string{"*"}) {
			t.Errorf("other account %+v", other)
		}

		// Revoke: idempotent, keeps the first time; only through the owning account.
		keyPath := base + "/" + sa.ID + "/keys/" + second.Data.Key.ID + "/revoke"
		var revoked, again envelope[saKeyBody]
		app.do(owner.as(request{method: "POST", path: keyPath})).decode(t, http.StatusOK, &revoked)
		if revoked.Data.RevokedAt == nil || revoked.Data.ID != second.Data.Key.ID || revoked.Data.PublicID != second.Data.Key.PublicID {
			t.Fatalf("revoked %+v", revoked.Data)
		}
		app.do(owner.as(request{method: "POST", path: keyPath})).decode(t, http.StatusOK, &again)
		if again.Data.RevokedAt == nil || !again.Data.RevokedAt.Equal(*revoked.Data.RevokedAt) {
			t.Errorf("second revoke moved revokedAt: %v → %v", revoked.Data.RevokedAt, again.Data.RevokedAt)
		}
		for _, path := range []string{
			base + "/" + other.ID + "/keys/" + first.ID + "/revoke",
			base + "/" + sa.ID + "/keys/" + other.Keys[0].ID + "/revoke",
			base + "/" + sa.ID + "/keys/key_missing/revoke",
			base + "/sa_missing/keys/" + first.ID + "/revoke",
		} {
			app.do(owner.as(request{method: "POST", path: path})).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		}

		// Disable and enable.
		var disabled, enabled envelope[saBody]
		app.do(owner.as(request{method: "POST", path: base + "/" + sa.ID + "/disable"})).decode(t, http.StatusOK, &disabled)
		if disabled.Data.DisabledAt == nil || len(disabled.Data.Keys) != 3 || disabled.Data.APIKey != "" {
			t.Fatalf("disabled %+v", disabled.Data)
		}
		if a, err := st.APIKeyByPublicID(context.Background(), publicID); err != nil || a.DisabledAt == nil {
			t.Errorf("auth lookup after disable: %+v, %v", a, err)
		}
		app.do(owner.as(request{method: "POST", path: base + "/" + sa.ID + "/enable"})).decode(t, http.StatusOK, &enabled)
		if enabled.Data.DisabledAt != nil || enabled.Data.UpdatedAt.Before(disabled.Data.UpdatedAt) {
			t.Fatalf("enabled %+v", enabled.Data)
		}

		// List (viewer holds credential:read): public ids and states only.
		listRes := app.do(viewer.as(request{method: "GET", path: base}))
		var list envelope[[]saBody]
		listRes.decode(t, http.StatusOK, &list)
		if len(list.Data) != 2 || list.Data[0].ID != sa.ID || list.Data[1].ID != other.ID {
			t.Fatalf("list %+v", list.Data)
		}
		got := list.Data[0]
		if len(got.Keys) != 3 || got.Keys[0].ID != first.ID || got.Keys[1].ID != second.Data.Key.ID ||
			got.Keys[2].ID != third.Data.Key.ID || got.Keys[1].RevokedAt == nil || got.Keys[0].RevokedAt != nil ||
			got.DisabledAt != nil || got.APIKey != "" {
			t.Fatalf("listed account %+v", got)
		}
		var listRaw struct{ Data []json.RawMessage }
		_ = json.Unmarshal(listRes.Body.Bytes(), &listRaw)
		for _, a := range listRaw.Data {
			if got := saJSONKeys(t, a); !slices.Equal(got, saAccountMembers) {
				t.Errorf("listed account members %v, want %v", got, saAccountMembers)
			}
			var acc struct{ Keys []json.RawMessage }
			_ = json.Unmarshal(a, &acc)
			for _, k := range acc.Keys {
				if got := saJSONKeys(t, k); !slices.Equal(got, saKeyMembers) {
					t.Errorf("listed key members %v, want %v", got, saKeyMembers)
				}
			}
		}

		// Audit: every mutation, keys named by public id only.
		auditRes := app.do(owner.as(request{method: "GET", path: "/api/v1/projects/" + project.ID + "/audit-logs"}))
		var entries envelope[[]struct {
			Action   string
			Target   struct{ Type, ID string }
			Actor    struct{ Type, ID string }
			Metadata map[string]any
		}]
		auditRes.decode(t, http.StatusOK, &entries)
		counts := map[string]int{}
		for _, e := range entries.Data {
			counts[e.Action]++
			switch e.Action {
			case "service_account.create":
				if e.Target.Type != "service_account" || e.Metadata["publicId"] == nil || e.Actor.ID != owner.ID {
					t.Errorf("audit %+v", e)
				}
			case "api_key.create", "api_key.revoke":
				if e.Target.Type != "api_key" || !strings.HasPrefix(e.Target.ID, "key_") ||
					e.Metadata["publicId"] == nil || e.Metadata["serviceAccountId"] == nil {
					t.Errorf("audit %+v", e)
				}
			case "service_account.disable", "service_account.enable":
				if e.Target.Type != "service_account" || e.Target.ID != sa.ID {
					t.Errorf("audit %+v", e)
				}
			}
		}
		want := map[string]int{"service_account.create": 2, "api_key.create": 4, "api_key.revoke": 2,
			"service_account.disable": 1, "service_account.enable": 1}
		for action, n := range want {
			if counts[action] != n {
				t.Errorf("%d %s audit rows, want %d (all: %v)", counts[action], action, n, counts)
			}
		}

		// The keys, their secrets and their hashes appear nowhere after the minting responses:
		// not in list, get-like or audit responses, not in the logs, not in any database row.
		dump := saDumpDatabase(t, raw, st.Dialect())
		if !strings.Contains(dump, publicID) || !strings.Contains(dump, sa.ID) {
			t.Fatal("database dump misses the key's row: the grep below would prove nothing")
		}
		places := map[string]string{
			"list response":       listRes.Body.String(),
			"disable response":    fmt.Sprint(disabled),
			"audit response":      auditRes.Body.String(),
			"logs":                app.logs.String(),
			"database (raw rows)": dump,
		}
		for _, full := range []string{sa.APIKey, second.Data.APIKey, third.Data.APIKey, other.APIKey} {
			_, sec, _ := identity.ParseAPIKey(full)
			needles := map[string]string{"key": full, "secret": sec}
			h := identity.HashAPIKeySecret(app.srv.apiKeyPepper, sec)
			needles["hash (hex)"] = hex.EncodeToString(h)
			needles["hash (base64)"] = base64.StdEncoding.EncodeToString(h)
			for where, text := range places {
				for what, needle := range needles {
					if where == "database (raw rows)" && strings.HasPrefix(what, "hash") {
						continue // the stored hash is raw bytes; hex or base64 of it must not appear elsewhere
					}
					if strings.Contains(text, needle) {
						t.Errorf("%s contains the %s of %s", where, what, full[:19])
					}
				}
			}
		}
		if !strings.Contains(dump, string(hash)) {
			t.Error("the raw rows do not hold the HMAC of the first key's secret")
		}
	})
}

func TestServiceAccountValidation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		project := saProject(t, app, ten, "validation")
		otherProject := saProject(t, app, ten, "other")
		past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		base := "/api/v1/projects/" + project.ID + "/service-accounts"

		cases := []struct {
			name, body string
			paths      []string
		}{
			{"empty scopes", `{"name":"x","scopes":[]}`, []string{"body.scopes"}},
			{"no scopes", `{"name":"x"}`, []string{"body.scopes"}},
			{"unknown permission", `{"name":"x","scopes":["config:read","nope:read"]}`, []string{"body.scopes.1"}},
			{"two unknown permissions", `{"name":"x","scopes":["billing:explode","*","config:write"]}`, []string{"body.scopes.0", "body.scopes.2"}},
			{"project RBAC permission", `{"name":"x","scopes":["profile:read"]}`, []string{"body.scopes.0"}},
			{"bad permission grammar", `{"name":"x","scopes":["Config:Read"]}`, []string{"body.scopes.0"}},
			{"unknown environment", `{"name":"x","scopes":["*"],"environmentId":"env_missing"}`, []string{"body.environmentId"}},
			{"environment of another project", fmt.Sprintf(`{"name":"x","scopes":["*"],"environmentId":%q}`, otherProject.Environments[0].ID), []string{"body.environmentId"}},
			{"expiresAt in the past", fmt.Sprintf(`{"name":"x","scopes":["*"],"expiresAt":%q}`, past), []string{"body.expiresAt"}},
			{"everything at once", fmt.Sprintf(`{"name":"x","scopes":["nope:nope"],"environmentId":"env_missing","expiresAt":%q}`, past),
				[]string{"body.scopes.0", "body.environmentId", "body.expiresAt"}},
			{"empty name", `{"name":"","scopes":["*"]}`, []string{"body.name"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				p := app.do(owner.as(request{method: "POST", path: base, body: c.body})).
					wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
				wantPaths(t, p.Errors, c.paths...)
				for _, e := range p.Errors {
					if strings.Contains(e.Message, "nope") || strings.Contains(e.Message, "env_missing") {
						t.Errorf("message %q echoes the input", e.Message)
					}
				}
			})
		}
		var list envelope[[]saBody]
		app.do(owner.as(request{method: "GET", path: base})).decode(t, http.StatusOK, &list)
		if len(list.Data) != 0 {
			t.Fatalf("refused creations created %d accounts", len(list.Data))
		}

		// Accepted: every control-plane permission, "*", a pin, a future expiry.
		all := `"` + strings.Join(allPermissions, `","`) + `"`
		sa := saCreate(t, app, owner, project.ID, fmt.Sprintf(`{"name":"x","scopes":[%s,"*"],"environmentId":%q,"expiresAt":%q}`,
			all, project.Environments[0].ID, future))
		if len(sa.Scopes) != len(allPermissions)+1 {
			t.Errorf("scopes %v", sa.Scopes)
		}

		// Minting checks expiresAt too.
		keys := base + "/" + sa.ID + "/keys"
		p := app.do(owner.as(request{method: "POST", path: keys, body: fmt.Sprintf(`{"expiresAt":%q}`, past)})).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		wantPaths(t, p.Errors, "body.expiresAt")
		p = app.do(owner.as(request{method: "POST", path: keys, body: `{"expiresAt":"tomorrow"}`})).
			wantProblem(t, http.StatusBadRequest, "validation", "Validation failed")
		wantPaths(t, p.Errors, "body.expiresAt")
		var minted envelope[saMinted]
		app.do(owner.as(request{method: "POST", path: keys, body: `{}`})).decode(t, http.StatusCreated, &minted)
		if got := getServiceAccount(t, app, project.ID, sa.ID); len(got.Keys) != 2 {
			t.Errorf("after one refused and one accepted mint: %d keys, want 2", len(got.Keys))
		}
	})
}

func getServiceAccount(t *testing.T, app *testApp, projectID, id string) store.ServiceAccount {
	t.Helper()
	sa, err := app.store.ServiceAccount(context.Background(), projectID, id)
	if err != nil {
		t.Fatal(err)
	}
	return sa
}

// TestServiceAccountAccess: who may do what. Reading needs credential:read (every role);
// everything else is credential:manage (owner, admin) on a user session; a non-member gets 404;
// an account addressed through another project is 404.
func TestServiceAccountAccess(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b storetest.Backend) {
		app := newTestApp(t, b.Open(t), testConfig())
		ten := app.newTenancy(t)
		owner := ten.members[RoleOwner]
		sa := saCreate(t, app, owner, ten.project.ID, `{"name":"svc","scopes":["project:read"]}`)
		base := "/api/v1/projects/" + ten.project.ID + "/service-accounts"

		type op struct {
			name, method, path, body string
			status                   int
			manage                   bool
		}
		ops := []op{
			{"list", "GET", base, "", http.StatusOK, false},
			{"create", "POST", base, `{"name":"x","scopes":["*"]}`, http.StatusCreated, true},
			{"disable", "POST", base + "/" + sa.ID + "/disable", "", http.StatusOK, true},
			{"enable", "POST", base + "/" + sa.ID + "/enable", "", http.StatusOK, true},
			{"mint", "POST", base + "/" + sa.ID + "/keys", "", http.StatusCreated, true},
			{"revoke", "POST", base + "/" + sa.ID + "/keys/" + sa.Keys[0].ID + "/revoke", "", http.StatusOK, true},
		}
		for _, o := range ops {
			for _, who := range append(slices.Clone(fixedRoles), "non-member") {
				t.Run(o.name+"/"+who, func(t *testing.T) {
					caller := ten.stranger
					if who != "non-member" {
						caller = ten.members[who]
					}
					res := app.do(caller.as(request{method: o.method, path: o.path, body: o.body}))
					switch {
					case who == "non-member":
						res.wantProblem(t, http.StatusNotFound, "http-404", "Not found")
					case o.manage && who != RoleOwner && who != RoleAdmin:
						res.wantProblem(t, http.StatusForbidden, "http-403", "Permission denied")
					case res.Code != o.status:
						t.Fatalf("status %d, want %d: %s", res.Code, o.status, res.Body)
					}
				})
			}
		}

		// The owner and the admin each minted one key; the list ended with an enable.

		// Addressed through another project of the same organization (the owner may manage
		// both): not found.
		other := saProject(t, app, ten, "other")
		otherBase := "/api/v1/projects/" + other.ID + "/service-accounts"
		for _, path := range []string{
			otherBase + "/" + sa.ID + "/disable",
			otherBase + "/" + sa.ID + "/enable",
			otherBase + "/" + sa.ID + "/keys",
			otherBase + "/" + sa.ID + "/keys/" + sa.Keys[0].ID + "/revoke",
		} {
			app.do(owner.as(request{method: "POST", path: path})).wantProblem(t, http.StatusNotFound, "http-404", "Not found")
		}
		var list envelope[[]saBody]
		app.do(owner.as(request{method: "GET", path: otherBase})).decode(t, http.StatusOK, &list)
		if len(list.Data) != 0 {
			t.Errorf("another project lists %d accounts", len(list.Data))
		}
		if got := getServiceAccount(t, app, ten.project.ID, sa.ID); got.DisabledAt != nil || len(got.Keys) != 3 {
			t.Errorf("cross-project calls changed the account: %+v", got)
		}
	})
}
