// Package identity is the home of accounts: password hashing and the bound on concurrent
// hashing (HashLimiter), browser sessions (tokens, signed cookies, lookup and creation:
// Sessions), the database-backed sign-in and sign-up throttles, the API-key format, the one
// random base62 generator, and the social sign-in providers (GitHub and Google).
//
// It may import store/ (and store/seal); it never imports oauth/ or server/, which both build
// on it: the provider's pages read sessions through it, and server/'s /api/auth handlers sign
// users in with it. TestLayers (package main) holds that rule.
package identity
