package store

import (
	"context"
	"database/sql"
	"strings"
)

// MaxTurnOutput bounds the output kept of one attempt: its last bytes.
const MaxTurnOutput = 8 << 10

// TurnOutput is the tail of what the agent wrote in one attempt of a turn.
type TurnOutput struct {
	Attempt   int    `json:"attempt"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Output    string `json:"output"`
	CreatedAt int64  `json:"created_at"`
}

// PutTurnOutput keeps the last MaxTurnOutput bytes of an attempt's output,
// as valid UTF-8 without NUL bytes (which PostgreSQL text refuses).
func (s *Store) PutTurnOutput(ctx context.Context, turnID int64, o TurnOutput) error {
	out := o.Output
	if len(out) > MaxTurnOutput {
		out = out[len(out)-MaxTurnOutput:]
	}
	out = strings.ToValidUTF8(strings.ReplaceAll(out, "\x00", ""), "\uFFFD")
	var exit any
	if o.ExitCode != nil {
		exit = *o.ExitCode
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO turn_outputs (turn_id, attempt, exit_code, output, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (turn_id, attempt) DO UPDATE SET exit_code = excluded.exit_code, output = excluded.output, created_at = excluded.created_at`,
		turnID, o.Attempt, exit, out, now())
	return err
}

// TurnOutputs returns the kept output of a turn's attempts, in order.
func (s *Store) TurnOutputs(ctx context.Context, turnID int64) ([]TurnOutput, error) {
	return queryAll(ctx, s.db, func(sc scanner) (TurnOutput, error) {
		var o TurnOutput
		var exit sql.NullInt64
		err := sc.Scan(&o.Attempt, &exit, &o.Output, &o.CreatedAt)
		if exit.Valid {
			n := int(exit.Int64)
			o.ExitCode = &n
		}
		return o, err
	}, `SELECT attempt, exit_code, output, created_at FROM turn_outputs WHERE turn_id = ? ORDER BY attempt`, turnID)
}

// HandedOff reports whether folder delegated or escalated work (a message
// from it to another folder) at or after sinceMillis: a turn that handed its
// question on is not unanswered, whoever answers.
func (s *Store) HandedOff(ctx context.Context, folder string, sinceMillis int64) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages WHERE sender = ? AND direction = 'in'
		AND how IN ('delegate', 'escalate') AND created_at >= ?`, "folder:"+folder, sinceMillis).Scan(&n)
	return n > 0, err
}
