// Package migrations holds Gatehouse's database schema as golang-migrate SQL
// files, one folder per dialect: postgres/ and sqlite/. Both folders carry the
// same version numbers (migrations_test.go checks it) and are embedded in the
// binary; store.Store.Migrate applies the folder for its dialect.
//
// File names follow golang-migrate: NNNN_name.up.sql and NNNN_name.down.sql.
// Files never contain BEGIN/COMMIT: golang-migrate runs each file in a
// transaction of its own.
//
// SQLite conventions (the only place they are written down):
//   - timestamps are TEXT in fixed-width RFC 3339 UTC with microseconds,
//     "2006-01-02T15:04:05.000000Z", so they sort lexically in time order
//     (the store formats and parses them; see store/dialect.go);
//   - JSON documents are TEXT holding a JSON object.
//
// PostgreSQL uses TIMESTAMPTZ and JSONB for the same columns, and
// COLLATE "C" on ID columns so that time-ordered IDs sort bytewise.
package migrations

import "embed"

// FS holds postgres/*.sql and sqlite/*.sql.
//
//go:embed postgres/*.sql sqlite/*.sql
var FS embed.FS
