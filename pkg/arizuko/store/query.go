package store

import (
	"context"
	"database/sql"
)

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// conn runs queries written with ? placeholders in the store's dialect, on the
// database or inside a transaction.
type conn struct {
	q querier
	d *dialect
}

func (c conn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return c.q.ExecContext(ctx, c.d.rebind(q), c.d.args(args)...)
}

func (c conn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return c.q.QueryContext(ctx, c.d.rebind(q), c.d.args(args)...)
}

func (c conn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return c.q.QueryRowContext(ctx, c.d.rebind(q), c.d.args(args)...)
}

// insertID runs an INSERT … RETURNING id and returns the id.
func (c conn) insertID(ctx context.Context, q string, args ...any) (int64, error) {
	var id int64
	err := c.QueryRowContext(ctx, q+` RETURNING id`, args...).Scan(&id)
	return id, err
}

// lock runs one of the dialect's lock statements ("" where the engine needs none) as
// the first statement of a transaction.
func (c conn) lock(ctx context.Context, stmt string) error {
	if stmt == "" {
		return nil
	}
	_, err := c.ExecContext(ctx, stmt)
	return err
}

// scanner is what a row scan function needs from *sql.Row or *sql.Rows.
type scanner interface{ Scan(...any) error }

// queryAll runs q and scans every row with scan.
func queryAll[T any](ctx context.Context, c conn, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := c.QueryContext(ctx, q, args...)
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

// scanString is the scan function of a one-column text query.
func scanString(sc scanner) (string, error) {
	var s string
	err := sc.Scan(&s)
	return s, err
}
