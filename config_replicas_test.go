package main

import (
	"slices"
	"testing"
	"time"
)

// TestConfigReadReplicas: GATEHOUSE_DATABASE_READ_URL is a comma-separated list of postgres://
// URLs that needs a PostgreSQL primary; GATEHOUSE_READ_MAX_LAG defaults to 5s.
func TestConfigReadReplicas(t *testing.T) {
	cfg, err := configFromEnv(envOf(nil))
	if err != nil || cfg.ReadURLs != nil || cfg.ReadMaxLag != 5*time.Second {
		t.Fatalf("defaults: %v %v, %v; want no replicas and 5s", cfg.ReadURLs, cfg.ReadMaxLag, err)
	}
	primary := "postgres://gh@db-primary:5432/gh"
	cfg, err = configFromEnv(envOf(map[string]string{"GATEHOUSE_DATABASE_URL": primary,
		"GATEHOUSE_DATABASE_READ_URL": " postgres://gh@db-r1:5432/gh ,, postgresql://gh@db-r2/gh?sslmode=require",
		"GATEHOUSE_READ_MAX_LAG":      "750ms"}))
	want := []string{"postgres://gh@db-r1:5432/gh", "postgresql://gh@db-r2/gh?sslmode=require"}
	if err != nil || !slices.Equal(cfg.ReadURLs, want) || cfg.ReadMaxLag != 750*time.Millisecond {
		t.Errorf("replicas %v, max lag %v, %v; want %v and 750ms", cfg.ReadURLs, cfg.ReadMaxLag, err, want)
	}
	for _, env := range []map[string]string{
		{"GATEHOUSE_DATABASE_READ_URL": "postgres://gh@db-r1/gh"}, // the primary is SQLite
		{"GATEHOUSE_DATABASE_URL": primary, "GATEHOUSE_DATABASE_READ_URL": "sqlite:replica.db"},
		{"GATEHOUSE_DATABASE_URL": primary, "GATEHOUSE_DATABASE_READ_URL": "postgres://gh@db-r1/gh, mysql://db-r2"},
	} {
		_, err := configFromEnv(envOf(env))
		wantConfigError(t, err, "GATEHOUSE_DATABASE_READ_URL", env["GATEHOUSE_DATABASE_READ_URL"])
	}
	for _, v := range []string{"0s", "-1s", "5", "2h"} {
		_, err := configFromEnv(envOf(map[string]string{"GATEHOUSE_READ_MAX_LAG": v}))
		wantConfigError(t, err, "GATEHOUSE_READ_MAX_LAG", v)
	}
}
