package server

import (
	"errors"
	"testing"
	"time"
)

func TestConfigSessionLifetimes(t *testing.T) {
	cfg, err := ConfigFromEnv(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SessionIdleTimeout != 168*time.Hour || cfg.SessionAbsoluteLifetime != 720*time.Hour {
		t.Errorf("defaults: idle %v, absolute %v; want 168h and 720h", cfg.SessionIdleTimeout, cfg.SessionAbsoluteLifetime)
	}
	cfg, err = ConfigFromEnv(envOf(map[string]string{
		"GATEHOUSE_SESSION_IDLE_TIMEOUT": "30m", "GATEHOUSE_SESSION_ABSOLUTE_LIFETIME": " 12h ",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SessionIdleTimeout != 30*time.Minute || cfg.SessionAbsoluteLifetime != 12*time.Hour {
		t.Errorf("set: idle %v, absolute %v; want 30m and 12h", cfg.SessionIdleTimeout, cfg.SessionAbsoluteLifetime)
	}
	for _, name := range []string{"GATEHOUSE_SESSION_IDLE_TIMEOUT", "GATEHOUSE_SESSION_ABSOLUTE_LIFETIME"} {
		for _, bad := range []string{"30d", "7", "-1h", "59s", "forever"} {
			_, err := ConfigFromEnv(envOf(map[string]string{name: bad}))
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Var != name {
				t.Errorf("%s=%q: err = %v, want a ConfigError naming it", name, bad, err)
				continue
			}
			if want := "invalid " + name + ": want a Go duration of at least 1m, for example 720h"; err.Error() != want {
				t.Errorf("%s=%q: %q, want %q", name, bad, err, want)
			}
		}
	}
}
