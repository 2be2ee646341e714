# Gatehouse — the two quick-start commands are `make run` and `make test`.

GO      ?= go
BIN     ?= bin/gatehouse
# The origin written into the committed snapshot openapi/openapi.json.
PRODUCTION_ORIGIN ?= https://gatehouse.example.com
STATICCHECK_VERSION ?= v0.8.2
SCALAR_BUNDLE := server/docsui/dist/scalar.js
# What every build of the binary embeds (build, release and the Dockerfile, which runs make
# build): add new embedded assets here, not to one target.
BUILD_ASSETS := assets console
CONSOLE_EMBED := server/consoleui/dist

# The version stamped into the binary (gatehouse version, /api/v1/health): the nearest tag, or
# the short commit, with -dirty for uncommitted changes; the Dockerfile passes both in.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# make release: static binaries (modernc SQLite needs no cgo) for these GOOS/GOARCH pairs.
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64 windows/amd64

.PHONY: run build release test test-ha generate check bench bench-pinned bench-scale assets console clean

## run: serve on http://localhost:8080 with embedded SQLite under ./data
run: $(BUILD_ASSETS)
	$(GO) run -ldflags "$(LDFLAGS)" .

## build: the gatehouse binary, with the explorer bundle and the console embedded, and the version stamped in
build: $(BUILD_ASSETS)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

## release: static binaries (CGO_ENABLED=0, -trimpath, stripped) for RELEASE_PLATFORMS into
## dist/ as gatehouse-VERSION-OS-ARCH[.exe], from the same inputs as build, and dist/SHA256SUMS
release: $(BUILD_ASSETS)
	@rm -rf dist && mkdir -p dist
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; ext=; if [ "$$os" = windows ]; then ext=.exe; fi; \
		out=dist/gatehouse-$(VERSION)-$$os-$$arch$$ext; echo "release: $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $$out .; \
	done
	cd dist && sha256sum gatehouse-* > SHA256SUMS && cat SHA256SUMS

## test: every Go test (store suite on SQLite, and on PostgreSQL when GATEHOUSE_TEST_POSTGRES_URL is set),
## including the real clients in e2e/: better-auth's browser client, the openapi-typescript +
## openapi-fetch client type-checked with tsc --strict, and oapi-codegen's Go client, the last
## two generated from the committed openapi/openapi.json (node and npm ci are required)
# go test starts the packages' test binaries in the order they are named, -p (the cores) at a
# time, so the longest come first: ./server/ alone takes about as long as the rest together, and named
# by ./... alone it started about nine minutes in, when the alphabetical order reached it.
# ./... then adds every other package once.
TEST_PACKAGES = ./server/ . ./e2e/ ./store/ ./oauth/ ./...
test: assets console
	GATEHOUSE_REQUIRE_NODE_E2E=1 $(GO) test -race -count=1 -timeout 45m -skip '^TestHA' $(TEST_PACKAGES)

## test-ha: the failover tests (docs/failover.md): a database outage behind a TCP proxy
## (needs GATEHOUSE_TEST_POSTGRES_URL) and a real primary + synchronous standby killed, promoted
## and switched under mixed load (needs PostgreSQL 15's server programs; GATEHOUSE_REQUIRE_PG_CLUSTER=1
## makes their absence a failure), with the proxy's and the fixture's own tests; each prints its
## unavailability window. make test leaves the TestHA… tests to this target.
test-ha:
	$(GO) test -count=1 ./internal/... ./store/pgcluster/
	$(GO) test -count=1 -v -timeout 20m -run '^TestHA' .

## assets: fetch the npm build tools and copy the Scalar bundle into the embed folder
assets: node_modules/.package-lock.json $(SCALAR_BUNDLE)

# The go.mod marker makes node_modules a separate module, so ./... never reaches the Go
# packages some npm dependencies ship.
# --loglevel=error: @scalar/api-reference 1.72.x and its two dozen @scalar/* dependencies
# declare engines node >=22, and npm 11 warns about each on Node 20 (about 120 lines, every
# fresh checkout). Only their prebuilt browser bundle is used (copied below, run by browsers,
# checked by the e2e/ Chromium tests), never Node code, so the warning does not apply; the
# newest bundles all declare it, and an older Scalar would lose fixes. Errors still print.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@printf 'module ignore\n' > node_modules/go.mod
	@touch $@

# Copied only when the bytes differ, so go build's cache stays warm.
$(SCALAR_BUNDLE): node_modules/.package-lock.json
	@mkdir -p $(dir $@)
	@cmp -s node_modules/@scalar/api-reference/dist/browser/standalone.js $@ || \
		cp node_modules/@scalar/api-reference/dist/browser/standalone.js $@

## console: the admin console (console/, React + Vite): npm ci, the types and permission table
## generated from openapi/openapi.json, tsc, vite build, the initial-JS budget; the output is
## copied into $(CONSOLE_EMBED) (embedded by server/consoleui, never committed)
console: console/node_modules/.package-lock.json
	cd console && npm run --silent build
	rsync -a --delete --checksum --exclude README.md console/dist/ $(CONSOLE_EMBED)/

console/node_modules/.package-lock.json: console/package.json console/package-lock.json
	cd console && npm ci --no-audit --no-fund --loglevel=error
	@printf 'module ignore\n' > console/node_modules/go.mod
	@touch $@

## generate: regenerate gen/ and the committed snapshot openapi/openapi.json from openapi/openapi.yaml,
## then the end-to-end tests' Go client e2e/goclient/ from that snapshot
generate:
	PRODUCTION_ORIGIN=$(PRODUCTION_ORIGIN) $(GO) generate ./gen/...
	$(GO) generate ./e2e/goclient/...

## check: generation drift, formatting, vet, staticcheck, spec lint, migration parity, the import
## layers (store/ < identity/ < oauth/ < server/, over go list -deps) and at most 600 lines per
## hand-written Go file, and README.md at most 250 lines (TestReadmeLines)
check: assets console
	@$(MAKE) --no-print-directory generate
	@git diff --exit-code -- gen openapi/openapi.json e2e/goclient || { echo "check: gen/, openapi/openapi.json or e2e/goclient/ is stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- gen openapi e2e/goclient)" || { git status --porcelain -- gen openapi e2e/goclient; echo "check: untracked generated files"; exit 1; }
	@fmt=$$(gofmt -l $$(git ls-files '*.go')); test -z "$$fmt" || { echo "check: gofmt needed:"; echo "$$fmt"; exit 1; }
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true npx --no-install redocly lint --config openapi/redocly.yaml --format=stylish openapi/openapi.yaml
	$(GO) test -count=1 -run 'TestDialectsHaveSameVersions' ./migrations/
	$(GO) test -count=1 -run 'TestLayers|TestFileSizes|TestReadmeLines|TestDocsLinks' .
	cd console && node scripts/budget.mjs

## bench: Go benchmarks of the hot paths (a batch's cost to the server alone among them), then loopback load runs (16 connections, 5 s each) of
## POST /api/v1/authorize, of batches of 100 checks (plain and explained) against the same checks
## one by one, of effective permissions and who-holds (10,000 principals), and of a secret reveal
## with an API key, of the OAuth provider's token and
## introspection endpoints (./oauth/), and usage ingest (single and batches of 100, new and duplicate
## events, in one project and spread over 10 projects with 10 keys, CPU per event; then pgbench's raw
## INSERT limit for the same shapes, tools/pgbench-usage.sh); SQLite always, PostgreSQL too when GATEHOUSE_TEST_POSTGRES_URL is set,
## and PostgreSQL's usage runs again with GOMAXPROCS=1 (the database's share of the cores;
## docs/operations.md, "Sharing cores with PostgreSQL").
## GATEHOUSE_BENCH_EVENTS=2000000 also seeds that many usage events, measures ingest again at that
## size and loads every analytics route (p50/p95). Last, the pinned runs (bench-pinned). Figures are recorded in docs/benchmarks.md.
bench: assets
	$(GO) test -run '^$$' -bench 'Decide|AuthorizeBatchHandler|DecisionsAnswer|APIKeyAuth|SubjectEntitlements|WebhookApply|IngestUsage' -benchmem -count=3 ./server/
	$(GO) test -run '^$$' -bench 'AuthorizeLoad|AuthorizeBatchLoad|RBACLookupLoad|ConfigRevealLoad' -benchtime=1x ./server/
	$(GO) test -run '^$$' -bench 'RequestPasswordResetTiming' -benchtime=400x ./server/
	$(GO) test -run '^$$' -bench 'OAuthTokenLoad|OAuthIntrospectLoad|OAuthPrivateKeyJWTLoad' -benchtime=1x ./oauth/
	$(GO) test -run '^$$' -bench 'UsageLoad' -benchtime=1x -timeout 60m ./server/
	GOMAXPROCS=1 $(GO) test -run '^$$' -bench 'UsageLoad/postgres' -benchtime=1x -timeout 60m ./server/
	@if [ -n "$$GATEHOUSE_TEST_POSTGRES_URL" ]; then tools/pgbench-usage.sh; fi
	@$(MAKE) --no-print-directory bench-pinned

## bench-pinned: the hot paths with the server in a child process pinned to core 1 (GOMAXPROCS=1) and the load
## generator pinned to core 0, beside a bare echo ceiling in the same child: echo, single, allow, deny, batch (100
## checks), batch-explain; the lookups (effective permissions, who-holds first page common and rare, 10,000 principals);
## usage ingest, single and batch (100), new and duplicate, in one project and over 10; 16 connections,
## GATEHOUSE_BENCH_DURATION each (default 5s: about 2 min a backend, seeding included); SQLite, and PostgreSQL (not
## pinned) when GATEHOUSE_TEST_POSTGRES_URL is set, then the raw insert limit (tools/pgbench-usage.sh on core 0, skipped
## with a note without pgbench); then the token endpoint (client_credentials, RS256 and ES256 keys) and introspection
## beside their own echo ceiling. Needs Linux, 2 cores and taskset; prints the figures against the targets of issues
## 24 and 27. docs/benchmarks.md, "Pinned runs". GATEHOUSE_BENCH_PROFILE=<folder> writes each child's CPU profile.
bench-pinned:
	GATEHOUSE_BENCH_DURATION=$${GATEHOUSE_BENCH_DURATION:-5s} $(GO) test -run '^$$' -bench 'PinnedLoad' -benchtime=1x -timeout 15m ./server/
	GATEHOUSE_BENCH_DURATION=$${GATEHOUSE_BENCH_DURATION:-5s} $(GO) test -run '^$$' -bench 'OAuthPinnedLoad' -benchtime=1x -timeout 15m ./oauth/

## bench-scale: usage on PostgreSQL at a size (GATEHOUSE_BENCH_EVENTS, default 10 M): the seed rate, ingest right
## after it and GATEHOUSE_BENCH_SETTLE (5m) later with the slowest request, batch ingest, every analytics route's p95, then
## the analytics again beside full-rate ingest; with GATEHOUSE_BENCH_REPLICA=1 on its own primary and standby, also from the standby.
## Needs GATEHOUSE_TEST_POSTGRES_URL (or GATEHOUSE_BENCH_REPLICA). Figures go in docs/benchmarks.md.
bench-scale:
	GATEHOUSE_BENCH_EVENTS=$${GATEHOUSE_BENCH_EVENTS:-10000000} $(GO) test -run '^$$' -bench UsageScale -benchtime 1x -timeout 180m ./server/

clean:
	rm -rf bin dist $(SCALAR_BUNDLE) console/dist
	find $(CONSOLE_EMBED) -mindepth 1 ! -name README.md -delete
