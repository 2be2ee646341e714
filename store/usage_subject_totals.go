package store

import "context"

// RepairSubjectTotals rebuilds, on PostgreSQL, the usage_subject_totals rows of every project
// whose totals no longer fold its usage_subjects rows, and returns those projects (sorted). It
// does nothing on SQLite, where one process writes.
//
// Every writer of this release keeps both tables in one transaction, so they only part when a
// release from before migration 34 records events or revenue after the migration ran: the old
// replicas of a rolling upgrade. The usage maintenance runs it on every replica, so the totals
// heal within the hour after the last old replica stops. The check compares per project the
// summed events, revenue and subject count of both tables in one statement (one snapshot, so a
// transaction in flight is in both or neither). A project is rebuilt while usage_subjects is
// locked against writers (SHARE), which holds ingest back for the time of that project's fold.
func (s *Store) RepairSubjectTotals(ctx context.Context) ([]string, error) {
	const op = "repair subject totals"
	if s.dialect != Postgres {
		return nil, nil
	}
	var drifted []string
	err := s.writer.SelectContext(ctx, &drifted, `SELECT project_id FROM
		(SELECT project_id, SUM(events) AS events, SUM(revenue) AS revenue, COUNT(DISTINCT subject_id) AS subjects
			FROM usage_subjects GROUP BY project_id) f
		FULL JOIN (SELECT project_id, SUM(events) AS events, SUM(revenue) AS revenue, COUNT(*) AS subjects
			FROM usage_subject_totals GROUP BY project_id) t USING (project_id)
		WHERE f.events IS DISTINCT FROM t.events OR f.revenue IS DISTINCT FROM t.revenue OR f.subjects IS DISTINCT FROM t.subjects
		ORDER BY project_id`)
	if err != nil {
		return nil, wrapError(op, err)
	}
	for _, project := range drifted {
		err := s.InTx(ctx, func(tx *Tx) error {
			if _, err := tx.tx.ExecContext(ctx, `LOCK TABLE usage_subjects IN SHARE MODE`); err != nil {
				return err
			}
			if _, err := tx.tx.ExecContext(ctx, `DELETE FROM usage_subject_totals WHERE project_id = $1`, project); err != nil {
				return err
			}
			_, err := tx.tx.ExecContext(ctx, `INSERT INTO usage_subject_totals (project_id, subject_id, first_seen, last_seen, events, quantity, revenue)
				SELECT project_id, subject_id, MIN(first_seen), MAX(last_seen), SUM(events), SUM(quantity), SUM(revenue)
				FROM usage_subjects WHERE project_id = $1 GROUP BY project_id, subject_id`, project)
			return err
		})
		if err != nil {
			return nil, wrapError(op, err)
		}
	}
	return drifted, nil
}
