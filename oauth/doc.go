// Package oauth is Gatehouse's identity component: password hashing, session tokens and
// cookies, sign-in throttling, and the OAuth 2.1 / OpenID Connect provider built on fosite.
// It holds no HTTP routing of the /api/v1 surface; server/ wires its handlers.
package oauth
