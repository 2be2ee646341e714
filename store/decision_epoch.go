package store

import (
	"context"
)

// Epoch is a decision epoch as read: a comparable value that triggers move, in the transaction
// of the change, on every insert, update and delete of a row that APIKeyDecision reads
// (organizations, projects, service accounts, API keys, bindings, roles and role permissions),
// except an API key's last_used_at (TouchAPIKey), whoever writes it.
//
//   - On SQLite it is one number for the whole file: Database
//     (migrations/sqlite/0036_decision_epoch.up.sql).
//   - On PostgreSQL it is the epochs of one project and its organization: Project and
//     Organization, each moved by the writes under it, each a fresh value of a sequence, so
//     that a row never shows a value twice (migrations/postgres/0037_decision_epochs.up.sql).
//     Writes to other tenants move neither, and RBAC writes of different projects do not wait on
//     each other.
type Epoch struct {
	Database, Project, Organization int64
}

// decisionEpochQuery reads the epoch: on PostgreSQL of a project ($1) and its organization ($2).
// An id without a row (nothing written under it since migration 37) reads as 0, a value the
// sequence never gives.
var decisionEpochQuery = map[Dialect]string{
	SQLite: `SELECT epoch AS database_epoch, 0 AS project_epoch, 0 AS organization_epoch FROM decision_epoch WHERE id = 1`,
	Postgres: `SELECT 0 AS database_epoch,
		COALESCE((SELECT epoch FROM decision_epochs WHERE scope_id = $1), 0) AS project_epoch,
		COALESCE((SELECT epoch FROM decision_epochs WHERE scope_id = $2), 0) AS organization_epoch`,
}

// epochColumns are the columns of APIKeyDecision's query that read the epoch of the key's
// project (a.project_id) and organization (p.organization_id), named as decisionEpochQuery's.
var epochColumns = map[Dialect]string{
	SQLite: `(SELECT epoch FROM decision_epoch WHERE id = 1) AS database_epoch, 0 AS project_epoch, 0 AS organization_epoch`,
	Postgres: `0 AS database_epoch,
		COALESCE((SELECT epoch FROM decision_epochs WHERE scope_id = a.project_id), 0) AS project_epoch,
		COALESCE((SELECT epoch FROM decision_epochs WHERE scope_id = p.organization_id), 0) AS organization_epoch`,
}

// epochRow scans the three epoch columns.
type epochRow struct {
	Database     int64 `db:"database_epoch"`
	Project      int64 `db:"project_epoch"`
	Organization int64 `db:"organization_epoch"`
}

func (r epochRow) epoch() Epoch { return Epoch(r) }

// DecisionEpoch returns the decision epoch of project projectID and its organization
// organizationID (SQLite's reads the file's one number and ignores both): one single-row read.
//
// The contract: a key and a decision that APIKeyDecision read together with epoch e, for a key of
// that project, are still what it would return for as long as DecisionEpoch returns e, up to the
// expiries the rows carry (the key's, KeyDecision.Until), which the caller judges against the
// clock.
func (s *Store) DecisionEpoch(ctx context.Context, projectID, organizationID string) (Epoch, error) {
	const op = "decision epoch"
	stmt, err := s.readStatement(ctx, decisionEpochQuery[s.dialect])
	if err != nil {
		return Epoch{}, wrapError(op, err)
	}
	var args []any
	if s.dialect == Postgres {
		args = []any{projectID, organizationID}
	}
	var r epochRow
	if err := stmt.GetContext(ctx, &r, args...); err != nil {
		return Epoch{}, wrapError(op, err)
	}
	return r.epoch(), nil
}
