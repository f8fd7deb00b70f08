package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Folder is one tenant row.
type Folder struct {
	Path           string   `json:"path"`
	DisplayName    string   `json:"display_name,omitempty"`
	AgentCommand   []string `json:"agent_command,omitempty"`
	GuestMemoryMiB int      `json:"guest_memory_mib,omitempty"`
	GuestCPUs      int      `json:"guest_cpus,omitempty"`
	// AgentEnv is KEY=VALUE set in the agent's environment; the guest sees
	// it, so it holds settings, never secrets.
	AgentEnv []string `json:"agent_env,omitempty"`
	// StdoutReply delivers the agent's final stdout as the reply of a turn
	// that called no reply tool.
	StdoutReply bool  `json:"stdout_reply,omitempty"`
	CreatedAt   int64 `json:"created_at,omitempty"`
}

// ErrNoParent and ErrHasChildren guard the tree shape.
var (
	ErrNoParent    = errors.New("parent folder does not exist")
	ErrHasChildren = errors.New("folder has children")
)

// InsertFolder adds a folder and makes it a member of role:member, in one
// transaction. parent ("" for top level) must already exist.
func (s *Store) InsertFolder(ctx context.Context, f Folder, parent string) error {
	cmd, err := json.Marshal(f.AgentCommand)
	if err != nil {
		return err
	}
	if f.AgentCommand == nil {
		cmd = []byte("[]")
	}
	env, err := jsonList(f.AgentEnv)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx conn) error {
		if parent != "" {
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM folders WHERE path = ?`, parent).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("folder %q: parent %q: %w (add it first)", f.Path, parent, ErrNoParent)
			}
			if err != nil {
				return err
			}
		}
		t := now()
		_, err := tx.ExecContext(ctx, `INSERT INTO folders (path, display_name, agent_command, guest_memory_mib, guest_cpus, agent_env, stdout_reply, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, f.Path, f.DisplayName, string(cmd), f.GuestMemoryMiB, f.GuestCPUs, env, boolInt(f.StdoutReply), t)
		if s.isUnique(err) {
			return fmt.Errorf("folder %q: %w", f.Path, ErrExists)
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO acl_membership (member, role, granted_by, created_at) VALUES (?, 'role:member', 'folder-add', ?)
			ON CONFLICT DO NOTHING`, "folder:"+f.Path, t)
		return err
	})
}

const folderCols = `path, display_name, agent_command, guest_memory_mib, guest_cpus, agent_env, stdout_reply, created_at`

func scanFolder(sc scanner) (Folder, error) {
	var f Folder
	var cmd, env string
	var stdout int
	if err := sc.Scan(&f.Path, &f.DisplayName, &cmd, &f.GuestMemoryMiB, &f.GuestCPUs, &env, &stdout, &f.CreatedAt); err != nil {
		return f, err
	}
	if err := json.Unmarshal([]byte(cmd), &f.AgentCommand); err != nil {
		return f, fmt.Errorf("folder %q: agent_command: %w", f.Path, err)
	}
	if err := json.Unmarshal([]byte(env), &f.AgentEnv); err != nil {
		return f, fmt.Errorf("folder %q: agent_env: %w", f.Path, err)
	}
	f.StdoutReply = stdout != 0
	return f, nil
}

// FolderChange is what UpdateFolder changes; a nil field stays as it is.
type FolderChange struct {
	AgentCommand *[]string
	AgentEnv     *[]string
	StdoutReply  *bool
}

// UpdateFolder changes a folder's agent settings.
func (s *Store) UpdateFolder(ctx context.Context, path string, c FolderChange) error {
	var sets []string
	var args []any
	if c.AgentCommand != nil {
		v, err := jsonList(*c.AgentCommand)
		if err != nil {
			return err
		}
		sets, args = append(sets, "agent_command = ?"), append(args, v)
	}
	if c.AgentEnv != nil {
		v, err := jsonList(*c.AgentEnv)
		if err != nil {
			return err
		}
		sets, args = append(sets, "agent_env = ?"), append(args, v)
	}
	if c.StdoutReply != nil {
		sets, args = append(sets, "stdout_reply = ?"), append(args, boolInt(*c.StdoutReply))
	}
	if len(sets) == 0 {
		return nil
	}
	args = append(args, path)
	if err := affected(s.db.ExecContext(ctx, `UPDATE folders SET `+strings.Join(sets, ", ")+` WHERE path = ?`, args...)); err != nil {
		return fmt.Errorf("folder %q: %w", path, err)
	}
	return nil
}

// jsonList is a list column's value; nil is the empty list.
func jsonList(l []string) (string, error) {
	if l == nil {
		return "[]", nil
	}
	b, err := json.Marshal(l)
	return string(b), err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// GetFolder returns one folder.
func (s *Store) GetFolder(ctx context.Context, path string) (Folder, error) {
	f, err := scanFolder(s.db.QueryRowContext(ctx, `SELECT `+folderCols+` FROM folders WHERE path = ?`, path))
	if errors.Is(err, sql.ErrNoRows) {
		return f, fmt.Errorf("folder %q: %w", path, ErrNotFound)
	}
	return f, err
}

// ListFolders returns every folder ordered by path.
func (s *Store) ListFolders(ctx context.Context) ([]Folder, error) {
	return queryAll(ctx, s.db, scanFolder, `SELECT `+folderCols+` FROM folders ORDER BY path`)
}

// DeleteFolder removes a folder that has no children, with its grants, the
// grants on it alone, membership edges, secrets, network rules, sessions and
// observers, and the routes and engagements that send chats to it or below it;
// its messages and closed turns stay, under RemovedPrefix.
func (s *Store) DeleteFolder(ctx context.Context, path string) error {
	return s.tx(ctx, func(tx conn) error {
		// Children are the paths in [path+"/", path+"0"): '0' follows '/' in
		// byte order. A range, not LIKE, so no character in a name is special.
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM folders WHERE path >= ? AND path < ?`, path+"/", path+"0").Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("folder %q: %d below it: %w (remove them first)", path, n, ErrHasChildren)
		}
		if err := affected(tx.ExecContext(ctx, `DELETE FROM folders WHERE path = ?`, path)); err != nil {
			return fmt.Errorf("folder %q: %w", path, err)
		}
		// A folder later re-created under the same name starts clean: no
		// grants, memberships or secrets left over from the old tenant.
		for _, q := range []string{
			`DELETE FROM acl_membership WHERE member = ?`,
			`DELETE FROM acl WHERE principal = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, "folder:"+path); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM secrets WHERE scope_kind = 'folder' AND scope_id = ?`, path); err != nil {
			return err
		}
		// Nor what others were granted on it alone: a grant whose scope is the folder
		// or lies below it (acme, acme/**) would hand the next acme to the old
		// tenant's users. Wider scopes (the parent's acme/**) stay.
		if _, err := tx.ExecContext(ctx, `DELETE FROM acl WHERE scope = ? OR (scope >= ? AND scope < ?)`, path, path+"/", path+"0"); err != nil {
			return fmt.Errorf("folder %q: grants on it: %w", path, err)
		}
		// Nor its chats: a route's target is folder[#topic], so the folder's
		// routes are the target path itself, path#… ('$' follows '#') and
		// path/… (a {sender} template below it included).
		if _, err := tx.ExecContext(ctx, `DELETE FROM routes WHERE target = ? OR (target >= ? AND target < ?) OR (target >= ? AND target < ?)`,
			path, path+"#", path+"$", path+"/", path+"0"); err != nil {
			return fmt.Errorf("folder %q: routes: %w", path, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE chats SET engaged_folder = '', engaged_topic = '', engaged_at = 0
			WHERE engaged_folder = ? OR (engaged_folder >= ? AND engaged_folder < ?)`, path, path+"/", path+"0"); err != nil {
			return fmt.Errorf("folder %q: engagements: %w", path, err)
		}
		// Nor its history: its messages and closed turns move under a name no folder
		// can have ('#'), kept for the operator, so a folder re-created under the name
		// neither runs the old tenant's unclaimed messages nor lists its turns. An open
		// turn and the messages it claimed stay: the queue fails it, since the folder
		// is gone, and tells its chat.
		tomb := fmt.Sprintf("%s%d/", RemovedPrefix, time.Now().UnixNano())
		in := `(folder = ? OR (folder >= ? AND folder < ?))`
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET folder = CAST(? AS TEXT) || folder WHERE `+in+`
			AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.status IN ('queued', 'running') AND t.folder = messages.folder
				AND t.topic = messages.topic AND messages.id BETWEEN t.first_message AND t.last_message)`,
			tomb, path, path+"/", path+"0"); err != nil {
			return fmt.Errorf("folder %q: messages: %w", path, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE turns SET folder = CAST(? AS TEXT) || folder WHERE `+in+`
			AND status NOT IN ('queued', 'running')`, tomb, path, path+"/", path+"0"); err != nil {
			return fmt.Errorf("folder %q: turns: %w", path, err)
		}
		return nil
	})
}

// RemovedPrefix starts the folder column of the messages and turns of a removed
// folder: "#removed/<unix nanos>/<path>".
const RemovedPrefix = "#removed/"
