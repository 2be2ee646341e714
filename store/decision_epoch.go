package store

import (
	"context"
)

// Epoch is a decision epoch as read: a number that triggers move, in the transaction of the
// change, on every insert, update and delete of a row that APIKeyDecision reads (organizations,
// projects, service accounts, API keys, bindings, roles and role permissions), except an API
// key's last_used_at (TouchAPIKey), whoever writes it. Equal epochs of one project mean that
// nothing those reads read has changed in between.
//
//   - On SQLite it is one number for the whole file (migrations/sqlite/0036_decision_epoch.up.sql).
//   - On PostgreSQL it is the epoch of one project, moved by the writes under that project
//     (through a key's account, a permission's role) and by any change to its organization, each
//     move a fresh value of a sequence, so that a row never shows a value twice
//     (migrations/postgres/0037_decision_epochs.up.sql). Writes to other projects leave it, and
//     RBAC writes of different projects do not wait on each other.
type Epoch int64

// decisionEpochQuery reads the epoch: on PostgreSQL of one project ($1). A project without a
// row reads as 0, a value the sequence never gives.
var decisionEpochQuery = map[Dialect]string{
	SQLite:   `SELECT epoch FROM decision_epoch WHERE id = 1`,
	Postgres: `SELECT COALESCE((SELECT epoch FROM decision_epochs WHERE scope_id = $1), 0)`,
}

// epochColumn is the column of APIKeyDecision's query that reads the epoch of the key's project
// (a.project_id).
var epochColumn = map[Dialect]string{
	SQLite:   `(SELECT epoch FROM decision_epoch WHERE id = 1) AS decision_epoch`,
	Postgres: `COALESCE((SELECT epoch FROM decision_epochs WHERE scope_id = a.project_id), 0) AS decision_epoch`,
}

// DecisionEpoch returns the decision epoch of project projectID (SQLite's reads the file's one
// number and ignores it): one single-row read, scanned without reflection (it runs on every
// kept /authorize request).
//
// The contract: a key of that project and a decision about it that APIKeyDecision read together
// with epoch e (or that were read after DecisionEpoch returned e) are still what it would
// return for as long as DecisionEpoch returns e, up to the expiries the rows carry (the key's,
// KeyDecision.Until), which the caller judges against the clock.
func (s *Store) DecisionEpoch(ctx context.Context, projectID string) (Epoch, error) {
	const op = "decision epoch"
	stmt, err := s.readStatement(ctx, decisionEpochQuery[s.dialect])
	if err != nil {
		return 0, wrapError(op, err)
	}
	var args []any
	if s.dialect == Postgres {
		args = []any{projectID}
	}
	var e Epoch
	if err := stmt.QueryRowContext(ctx, args...).Scan(&e); err != nil {
		return 0, wrapError(op, err)
	}
	return e, nil
}
