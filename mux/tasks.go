package mux

import (
	"encoding/json"
	"sync"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// taskTable knows which session created each task (MCP 2025-11-25 tasks), so
// that no other session may read, wait for or cancel it, and where a running
// task's progress goes. Invariant: byToken names only tasks that are in
// byID and not terminal. It is emptied when the process exits: a new one
// knows none of them.
type taskTable struct {
	mu      sync.Mutex
	byID    map[string]taskOwner
	byToken map[int64]string // upstream id of the creating request (its progress token) -> task
	// bySession: the ids in byID by owner, so that a departure visits only its own.
	bySession map[uint64]map[string]bool
}

// taskOwner is the session that created a task, and what its progress
// token maps to while the task runs.
type taskOwner struct {
	session  uint64
	up       int64           // the upstream id of the creating request, which is its progress token
	token    json.RawMessage // the session's progress token, nil if none
	terminal bool
}

func newTaskTable() taskTable {
	return taskTable{byID: make(map[string]taskOwner), byToken: make(map[int64]string), bySession: make(map[uint64]map[string]bool)}
}

func (t *taskTable) record(id string, o taskOwner) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byID[id]; ok && old.session != o.session {
		delete(t.bySession[old.session], id)
		if len(t.bySession[old.session]) == 0 {
			delete(t.bySession, old.session)
		}
	}
	t.byID[id] = o
	if t.bySession[o.session] == nil {
		t.bySession[o.session] = map[string]bool{}
	}
	t.bySession[o.session][id] = true
	if o.token != nil {
		t.byToken[o.up] = id
	}
}

// owner is the session that created a task; ok is false for an unknown task.
func (t *taskTable) owner(id string) (session uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.byID[id]
	return o.session, ok
}

// progress finds the owner of progress for a running task.
func (t *taskTable) progress(up int64) (session uint64, token json.RawMessage, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.byToken[up]
	if !ok {
		return 0, nil, false
	}
	o := t.byID[id]
	return o.session, o.token, true
}

// finish notes a terminal task: its progress token is retired.
func (t *taskTable) finish(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o, ok := t.byID[id]; ok {
		o.terminal = true
		t.byID[id] = o
		delete(t.byToken, o.up)
	}
}

// drop forgets a departed session's tasks and returns the unfinished ones.
func (t *taskTable) drop(session uint64) (unfinished []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.bySession[session] {
		o := t.byID[id]
		if !o.terminal {
			unfinished = append(unfinished, id)
		}
		delete(t.byID, id)
		delete(t.byToken, o.up)
	}
	delete(t.bySession, session)
	return unfinished
}

func (t *taskTable) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byID = make(map[string]taskOwner)
	t.byToken = make(map[int64]string)
	t.bySession = make(map[uint64]map[string]bool)
}

// recordTask notes the task a response created, if it created one.
func (u *upstreamHandler) recordTask(session uint64, up int64, token json.RawMessage, result json.RawMessage) {
	h := u.h
	if len(result) == 0 || result[0] != '{' {
		return
	}
	s, ok := jsonrpc.FindPath(result, "task", "taskId")
	if !ok {
		return
	}
	var id string
	if json.Unmarshal(result[s.Start:s.End], &id) != nil || id == "" {
		return
	}
	h.tasks.record(id, taskOwner{session: session, up: up, token: token})
}

// recordModernTask notes the task a modern result created (the tasks
// extension: resultType "task" and a taskId at the top), if it created one.
func (u *upstreamHandler) recordModernTask(session uint64, up int64, token json.RawMessage, result json.RawMessage) {
	h := u.h
	if len(result) == 0 || result[0] != '{' {
		return
	}
	if rt, _ := jsonrpc.StringMember(result, "resultType"); rt != "task" {
		return
	}
	id, _ := jsonrpc.StringMember(result, "taskId")
	if id == "" {
		return
	}
	h.tasks.record(id, taskOwner{session: session, up: up, token: token})
}

// ownsTask reports whether a session may name a task in tasks/get,
// tasks/result or tasks/cancel.
func (c *client) ownsTask(m *message) bool {
	id, ok := m.paramString(pTaskID)
	if !ok {
		return false
	}
	owner, known := c.h.tasks.owner(id)
	return known && owner == c.sess.ID()
}

// taskStatus notes a task that reached a terminal status.
func (u *upstreamHandler) taskStatus(m *jsonrpc.Message) {
	h := u.h
	var p struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	if m.Params == nil || json.Unmarshal(m.Params, &p) != nil {
		return
	}
	switch p.Status {
	case "completed", "failed", "cancelled":
		h.tasks.finish(p.TaskID)
	}
}

// dropTasks forgets a departed session's tasks, cancelling the unfinished
// ones when the server can: no other session may read them.
func (h *Hub) dropTasks(session uint64, proc process) {
	unfinished := h.tasks.drop(session)
	if len(unfinished) == 0 {
		return
	}
	info := h.life.described()
	switch {
	case info == nil:
	case info.era == eraModern:
		for _, id := range unfinished {
			h.fire(proc, "tasks/cancel", map[string]any{"taskId": id, "_meta": h.ownEnvelope()})
		}
	case info.hasPath("tasks", "cancel"):
		for _, id := range unfinished {
			h.fire(proc, "tasks/cancel", map[string]string{"taskId": id})
		}
	}
}

// toTaskOwner sends a notification that names a task to that task's owner
// alone; false when it names none.
func (u *upstreamHandler) toTaskOwner(m *message) bool {
	h := u.h
	id, ok := m.relatedTaskID()
	if !ok {
		if m.Method != "notifications/tasks/status" {
			return false
		}
		if id, ok = m.paramString(pTaskID); !ok {
			return false
		}
	}
	if owner, known := h.tasks.owner(id); known {
		if c := h.sessions.get(owner); c != nil {
			c.send(m.Frame)
		}
	}
	return true
}
