// Package oauth is Gatehouse's identity component: password hashing, browser sessions (tokens,
// signed cookies, lookup and creation: Sessions), API-key minting and parsing, the one random
// base62 generator, sign-in throttling, and the OAuth 2.1 / OpenID Connect provider built on
// fosite. It may import store/ but never server/ or gen/, so that server/ and the provider share
// these primitives without an import cycle. It holds no HTTP routing of the /api/v1 surface;
// server/ wires its handlers.
package oauth
