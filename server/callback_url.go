package server

import (
	"net/url"
	"strings"
)

// checkCallbackURL accepts a path on the caller's own site ("/…", not "//…") or an absolute
// http(s) URL on the base URL or a trusted origin, so that the client's redirect is never an
// open redirect. Back-slashes, white space and control characters, which browsers strip or
// read as slashes, are refused outright. No callbackURL (nil) is fine.
func (s *Server) checkCallbackURL(callbackURL *string) error {
	if callbackURL == nil {
		return nil
	}
	raw := *callbackURL
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c == 0x7f || c == '\\' {
			return errInvalidCallbackURL
		}
	}
	if strings.HasPrefix(raw, "/") {
		if strings.HasPrefix(raw, "//") {
			return errInvalidCallbackURL
		}
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		!s.trustedOrigin(u.Scheme+"://"+u.Host) {
		return errInvalidCallbackURL
	}
	return nil
}
