package server

import (
	"errors"
	"runtime"
	"testing"
	"time"
)

func TestConfigPasswordHashingAndSignUpLimit(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cfg, err := ConfigFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PasswordHashConcurrency != 0 || cfg.PasswordHashMemoryMB != 256 || cfg.PasswordHashWait != 2*time.Second || cfg.SignUpLimit != 10 {
		t.Errorf("defaults = %d, %d MiB, %v, %d", cfg.PasswordHashConcurrency, cfg.PasswordHashMemoryMB, cfg.PasswordHashWait, cfg.SignUpLimit)
	}
	// Derived: min(cores, 256 MiB / 19 MiB = 13), at least 1.
	if got, want := cfg.HashConcurrency(), max(1, min(runtime.NumCPU(), 13)); got != want {
		t.Errorf("HashConcurrency() = %d, want %d", got, want)
	}
	cfg, err = ConfigFromEnv(env(map[string]string{"GATEHOUSE_PASSWORD_HASH_MEMORY_MB": "19"}))
	if err != nil || cfg.HashConcurrency() != 1 {
		t.Errorf("19 MiB: %d, %v; want 1", cfg.HashConcurrency(), err)
	}
	cfg, err = ConfigFromEnv(env(map[string]string{"GATEHOUSE_PASSWORD_HASH_CONCURRENCY": "7",
		"GATEHOUSE_PASSWORD_HASH_WAIT": "500ms", "GATEHOUSE_SIGN_UP_LIMIT": "3"}))
	if err != nil || cfg.HashConcurrency() != 7 || cfg.PasswordHashWait != 500*time.Millisecond || cfg.SignUpLimit != 3 {
		t.Errorf("explicit: %+v, %v", cfg, err)
	}
	for name, value := range map[string]string{
		"GATEHOUSE_PASSWORD_HASH_CONCURRENCY": "0",
		"GATEHOUSE_PASSWORD_HASH_MEMORY_MB":   "18",
		"GATEHOUSE_PASSWORD_HASH_WAIT":        "2",
		"GATEHOUSE_SIGN_UP_LIMIT":             "ten",
	} {
		_, err := ConfigFromEnv(env(map[string]string{name: value}))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != name {
			t.Errorf("%s=%s: %v, want a ConfigError naming it", name, value, err)
		}
	}
}
