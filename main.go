// Command gatehouse is the Gatehouse control plane: one binary serving the administrative API
// (/api/v1), the identity provider (/api/auth, /.well-known) and the API explorer (/docs).
//
//	gatehouse [serve]          migrate the database, then serve until SIGINT/SIGTERM
//	gatehouse migrate up|down  apply or roll back every migration, then exit
//	gatehouse keys rewrap      re-seal every secret at rest under the current secret key
//	gatehouse keys rotate-signing
//	                           publish the next token signing key; it signs after the publish
//	                           delay, and the current key stays published until its tokens expire
//	gatehouse dev seed-usage -project ID [-events N] [-subjects M] [-days D]
//	                           write synthetic usage events (with their rollups) through the store
//	gatehouse version          print the version, commit and Go release (cli.go)
//	gatehouse --help | help [command]
//
// Configuration comes from GATEHOUSE_* environment variables, the table in config.go that
// docs/configuration.md shows. An invalid value exits with status 2 and one line naming the variable.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/gatehouse-dev/gatehouse/identity"
	"github.com/gatehouse-dev/gatehouse/identity/outbox"
	"github.com/gatehouse-dev/gatehouse/oauth"
	"github.com/gatehouse-dev/gatehouse/server"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if ok, status := infoCommand(os.Args[1:], os.Stdout, os.Stderr); ok {
		os.Exit(status)
	}
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil))
}

// run executes one command and returns the process exit status. ready, when not nil, receives
// the listening address once the server accepts connections.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready chan<- net.Addr) int {
	cfg, err := configFromEnv(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "gatehouse:", err)
		return 2
	}
	cfg.Build = buildInfo()
	log := newLogger(cfg, stderr)

	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch {
	case cmd == "serve" && len(args) <= 1:
		err = serve(ctx, cfg, log, ready)
	case cmd == "migrate" && len(args) == 2 && (args[1] == "up" || args[1] == "down"):
		err = migrate(ctx, cfg, args[1], log)
	case cmd == "keys" && len(args) == 2 && args[1] == "rewrap":
		err = rewrap(ctx, cfg, stderr, log)
	case cmd == "keys" && len(args) == 2 && args[1] == "rotate-signing":
		err = rotateSigning(ctx, cfg, stderr, log)
	case cmd == "dev" && len(args) >= 2 && args[1] == "seed-usage":
		err = seedUsage(ctx, cfg, args[2:], stderr, log)
	default:
		fmt.Fprintln(stderr, "usage: gatehouse [serve] | gatehouse migrate up|down | gatehouse keys rewrap|rotate-signing | gatehouse dev seed-usage -project ID | gatehouse version (gatehouse --help explains each)")
		return 2
	}
	var cerr *ConfigError
	switch {
	case errors.As(err, &cerr):
		fmt.Fprintln(stderr, "gatehouse:", cerr)
		return 2
	case err != nil:
		log.Error("gatehouse stopped", "err", err)
		return 1
	}
	return 0
}

func newLogger(cfg settings, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func serve(ctx context.Context, cfg settings, log *slog.Logger, ready chan<- net.Addr) error {
	// Listen first, then migrate, then serve: a busy address stops the process before it
	// touches the database or the key file.
	ln, err := listen("GATEHOUSE_LISTEN_ADDR", cfg.ListenAddr)
	if err != nil {
		return err
	}
	defer ln.Close()
	var mln net.Listener
	if cfg.MetricsAddr != "" {
		if mln, err = listen("GATEHOUSE_METRICS_ADDR", cfg.MetricsAddr); err != nil {
			return err
		}
		defer mln.Close()
	}
	log.Info("gatehouse starting", "version", cfg.Build.Version, "commit", cfg.Build.Commit, "go", cfg.Build.GoVersion)
	key, err := loadSecretKey(cfg.Config, log)
	if err != nil {
		return err
	}
	cfg.SecretKey = key
	st, err := store.Open(ctx, cfg.DatabaseURL, store.WithUsageRetention(cfg.UsageRetention),
		store.WithUsageReplayWindow(cfg.UsageReplayWindow), store.WithReadReplicas(cfg.ReadURLs, cfg.ReadMaxLag))
	if err != nil {
		return err
	}
	defer st.Close()
	applied, err := st.MigrateApplied(ctx)
	if err != nil {
		return err
	}
	log.Info("database schema", "migrations_applied", applied)
	if len(cfg.ReadURLs) > 0 {
		log.Info("read replicas", "count", len(cfg.ReadURLs), "max_lag", cfg.ReadMaxLag.String())
	}
	srv, workers, err := wire(ctx, cfg.Config, cfg.SigningAlg, cfg.SigningAlgs, st, log)
	if err != nil {
		return err
	}
	// The outbox workers (mail, webhooks) deliver until the server has drained, then finish the
	// attempts in flight and hand the rest back for other replicas.
	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	workersDone := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Go(func() { w.Run(wctx) })
		}
		wg.Go(func() { maintainUsage(wctx, st, log) })
		wg.Wait()
		close(workersDone)
	}()
	defer func() {
		stopWorkers()
		select {
		case <-workersDone:
		case <-time.After(cfg.ShutdownTimeout):
			log.Warn("outbox worker still busy at shutdown; its claim is retried after the lease")
		}
	}()
	if cfg.WebhookAllowPrivate {
		log.Warn("GATEHOUSE_WEBHOOK_ALLOW_PRIVATE is true: webhook endpoints may use http and private addresses (development only)")
	}
	if cfg.SMTP == nil {
		log.Warn("GATEHOUSE_SMTP_URL is not set: mail is not sent; each message and its link is logged (development mode)")
	}

	hs := srv.HTTPServer()
	errc := make(chan error, 2) // the app's and the metrics listener's Serve
	go func() { errc <- hs.Serve(srv.Listener(ln)) }()
	log.Info("gatehouse listening", "addr", ln.Addr().String(), "base_url", cfg.BaseURL, "database", string(st.Dialect()))
	if port := ln.Addr().(*net.TCPAddr).Port; baseURLPortMismatch(cfg.BaseURL, port) {
		log.Warn("GATEHOUSE_BASE_URL is on loopback but not on the listening port: browsers at the listening port "+
			"get 403 Invalid origin on every cookie write; set GATEHOUSE_BASE_URL to the address browsers use "+
			"(unless a proxy on the base URL's port forwards here)", "base_url", cfg.BaseURL, "listen_port", port)
	}
	if mln != nil {
		ms := metricsServer(srv)
		defer ms.Close()
		go func() { errc <- ms.Serve(mln) }()
		log.Info("metrics listening", "addr", mln.Addr().String(), "path", "/metrics")
	}
	if ready != nil {
		ready <- ln.Addr()
	}

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); errors.Is(err, context.DeadlineExceeded) {
		// A requested stop that has run its course is a clean exit (status 0), even when it
		// had to cut requests that outlived the drain: orchestrators read a non-zero status
		// after SIGTERM as a crash.
		log.Warn("drain timeout passed: closing the connections still open", "timeout", cfg.ShutdownTimeout.String())
		_ = hs.Close()
	} else if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// listen opens the TCP address that envVar configures. A busy address is a ConfigError (exit
// status 2) that says "address already in use" rather than the socket call's wording.
func listen(envVar, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, &ConfigError{Var: envVar, Reason: addr + ": address already in use (another process listens there: stop it or choose another address)"}
	case err != nil:
		return nil, &ConfigError{Var: envVar, Reason: err.Error()}
	}
	return ln, nil
}

// wire builds every dependency of the server once, in order, and the server over them: the
// keyring, the token signing keys (each of signingAlg and signingAlgs gets an active key), the accounts (sessions, password
// hashing, throttles, social providers), the OAuth provider, the mailer and the metrics; and
// the outbox workers that deliver the mailer's messages and the webhooks (serve runs them).
func wire(ctx context.Context, cfg server.Config, signingAlg string, signingAlgs []string, st *store.Store, log *slog.Logger) (*server.Server, []*outbox.Worker, error) {
	ring, err := seal.NewKeyring(cfg.SecretKey, cfg.OldSecretKeys...)
	if err != nil {
		return nil, nil, &ConfigError{Var: "GATEHOUSE_SECRET_KEYS_OLD", Reason: err.Error()}
	}
	keys := oauth.NewKeySet(st, ring, oauth.KeySetOptions{Algorithm: signingAlg, Algorithms: signingAlgs})
	signing, err := keys.EnsureAll(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("token signing key (sealed under GATEHOUSE_SECRET_KEY or GATEHOUSE_SECRET_KEYS_OLD): %w", err)
	}
	for _, k := range signing {
		log.Info("token signing key", "kid", k.ID, "alg", k.Algorithm, "signs_since", k.ActivatesAt)
	}
	if def, err := keys.Current(ctx); err == nil && def.Algorithm != keys.Algorithm() {
		log.Info("a key of another algorithm than GATEHOUSE_SIGNING_ALG signs by default until its rotation activates",
			"alg", def.Algorithm, "GATEHOUSE_SIGNING_ALG", keys.Algorithm())
	}
	social, err := identity.NewSocialProviders(cfg.BaseURL, cfg.Social)
	if err != nil {
		return nil, nil, err
	}
	accounts := identity.NewAccounts(st, cfg.AccountsConfig(social))
	provider, err := oauth.NewProvider(cfg.ProviderConfig(st, keys, accounts))
	if err != nil {
		return nil, nil, err
	}
	metrics := server.NewMetrics(st.Pools())
	metrics.ObserveOutbox(st)
	hooks := cfg.WebhookWorker(st, ring, log, metrics, outbox.WorkerConfig{})
	srv, err := server.New(cfg, server.Deps{
		Store: st, Log: log, Keyring: ring, Accounts: accounts, Provider: provider,
		Mailer: cfg.Mailer(st, ring), Metrics: metrics,
		Webhooks: cfg.Webhooks(st, ring), PokeWebhooks: hooks.Poke,
	})
	if err != nil {
		return nil, nil, err
	}
	return srv, []*outbox.Worker{cfg.OutboxWorker(st, ring, log, outbox.WorkerConfig{}), hooks}, nil
}

// metricsServer serves srv's Prometheus metrics at /metrics and nothing else: it is the
// GATEHOUSE_METRICS_ADDR listener, separate from the app's so that metrics are never public by
// accident.
func metricsServer(srv *server.Server) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", srv.MetricsHandler())
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
}

func migrate(ctx context.Context, cfg settings, direction string, log *slog.Logger) error {
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if direction == "down" {
		err = st.MigrateDown(ctx)
	} else {
		err = st.Migrate(ctx)
	}
	if err != nil {
		return err
	}
	v, dirty, err := st.Version(ctx)
	if err != nil {
		return err
	}
	log.Info("migrated", "direction", direction, "version", v, "dirty", dirty)
	return nil
}
