package server

import (
	"runtime"
	"testing"
)

// Reading the configuration from the environment is package main's (config_test.go there);
// these test what the server derives from a Config.

func TestNormalizeOrigin(t *testing.T) {
	good := map[string]string{
		"https://App.Example.com":     "https://app.example.com",
		"https://app.example.com/":    "https://app.example.com",
		"https://app.example.com:443": "https://app.example.com",
		"http://localhost:8080":       "http://localhost:8080",
		"http://[::1]:8080":           "http://[::1]:8080",
	}
	for in, want := range good {
		if got, err := NormalizeOrigin(in); err != nil || got != want {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"null", "", "app.example.com", "ftp://x.example.com", "https://x.example.com/app",
		"https://user@x.example.com", "https://x.example.com?q=1", "javascript:alert(1)"} {
		if got, err := NormalizeOrigin(in); err == nil {
			t.Errorf("NormalizeOrigin(%q) = %q, want an error", in, got)
		}
	}
}

func TestInvitationURL(t *testing.T) {
	s := &Server{cfg: Config{BaseURL: "http://localhost:8080", InvitationURL: "https://app.example.com/join/{id}?from=mail"}}
	if got := s.invitationAcceptURL("inv_123"); got != "https://app.example.com/join/inv_123?from=mail" {
		t.Fatalf("accept URL = %q", got)
	}
	if got := (&Server{cfg: Config{BaseURL: "http://localhost:8080"}}).invitationAcceptURL("inv_1"); got != "http://localhost:8080/accept-invitation/inv_1" {
		t.Fatalf("default accept URL = %q", got)
	}
}

func TestHashConcurrency(t *testing.T) {
	// Derived: min(cores, 256 MiB / 19 MiB = 13), at least 1; 256 MiB when the memory is unset.
	for _, mb := range []int{0, DefaultPasswordHashMemoryMB} {
		if got, want := (Config{PasswordHashMemoryMB: mb}).HashConcurrency(), max(1, min(runtime.NumCPU(), 13)); got != want {
			t.Errorf("%d MiB: HashConcurrency() = %d, want %d", mb, got, want)
		}
	}
	if got := (Config{PasswordHashMemoryMB: 19}).HashConcurrency(); got != 1 {
		t.Errorf("19 MiB: HashConcurrency() = %d, want 1", got)
	}
	if got := (Config{PasswordHashConcurrency: 7, PasswordHashMemoryMB: 19}).HashConcurrency(); got != 7 {
		t.Errorf("explicit 7: HashConcurrency() = %d", got)
	}
}
