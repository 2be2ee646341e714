package main

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/server"
)

// TestConfigSignUp: GATEHOUSE_SIGN_UP is open by default, takes the three modes and names
// itself when the value is none of them.
func TestConfigSignUp(t *testing.T) {
	for value, want := range map[string]server.SignUpMode{
		"": server.SignUpOpen, "open": server.SignUpOpen, " invite-only ": server.SignUpInviteOnly, "closed": server.SignUpClosed,
	} {
		cfg, err := configFromEnv(envOf(map[string]string{"GATEHOUSE_SIGN_UP": value}))
		if err != nil || cfg.SignUp != want {
			t.Errorf("GATEHOUSE_SIGN_UP=%q: %q, %v; want %q", value, cfg.SignUp, err, want)
		}
	}
	for _, value := range []string{"invite_only", "Closed", "off"} {
		_, err := configFromEnv(envOf(map[string]string{"GATEHOUSE_SIGN_UP": value}))
		if ce := wantConfigError(t, err, "GATEHOUSE_SIGN_UP", value); ce != nil && ce.Reason != "want open, invite-only or closed" {
			t.Errorf("%q: reason %q", value, ce.Reason)
		}
	}
}
