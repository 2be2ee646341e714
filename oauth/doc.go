// Package oauth is Gatehouse's OAuth 2.1 / OpenID Connect provider and only that: fosite's
// wiring (the grant list in one file), the fosite storage adapter over store/, discovery,
// signing keys and the JWKS, OIDC client secrets and keys. It may import identity/ and store/,
// never server/ or gen/; server/ mounts it.
package oauth
