package store

import (
	"context"
	"database/sql"
)

// scanner is what a row scan function needs from *sql.Row or *sql.Rows.
type scanner interface{ Scan(...any) error }

// queryAll runs q and scans every row with scan.
func queryAll[T any](ctx context.Context, db *sql.DB, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
