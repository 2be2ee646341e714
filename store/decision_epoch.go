package store

import (
	"context"
	"errors"
)

// ErrNoDecisionEpoch is DecisionEpoch's error on a store that keeps no decision epoch.
var ErrNoDecisionEpoch = errors.New("store: this database keeps no decision epoch")

// KeepsDecisionEpoch reports whether DecisionEpoch answers on this store: on SQLite.
// PostgreSQL keeps none: there reading it would cost the round trip of APIKeyDecision, which
// reads the key and the decision together (migrations/postgres/0036_decision_epoch.up.sql).
func (s *Store) KeepsDecisionEpoch() bool { return s.dialect == SQLite }

// decisionEpochQuery reads the one row of decision_epoch.
const decisionEpochQuery = `SELECT epoch FROM decision_epoch WHERE id = 1`

// DecisionEpoch returns the decision epoch: a number that triggers move, in the
// transaction of the change, on every insert, update and delete of a row that
// APIKeyByPublicID or DecideUntil reads (organizations, projects, service
// accounts, API keys, bindings, roles and role permissions), except an API
// key's last_used_at (TouchAPIKey), whoever writes it
// (migrations/sqlite/0036_decision_epoch.up.sql).
//
// The contract: a key and a decision read after DecisionEpoch returned e are
// still what those queries would return for as long as DecisionEpoch returns e,
// up to the expiries the rows carry (the key's, DecideUntil's until), which the
// caller judges against the clock. Read the epoch first: a change that commits
// between the epoch and the reads moves the epoch, and the next check misses.
// It returns ErrNoDecisionEpoch when !KeepsDecisionEpoch().
func (s *Store) DecisionEpoch(ctx context.Context) (int64, error) {
	const op = "decision epoch"
	if !s.KeepsDecisionEpoch() {
		return 0, ErrNoDecisionEpoch
	}
	stmt, err := s.readStatement(ctx, decisionEpochQuery)
	if err != nil {
		return 0, wrapError(op, err)
	}
	var epoch int64
	if err := stmt.QueryRowContext(ctx).Scan(&epoch); err != nil {
		return 0, wrapError(op, err)
	}
	return epoch, nil
}
