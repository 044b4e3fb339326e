package mux

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/session"
)

// departTables are the per-session tables a departure clears, filled for n
// sessions: each set a log level, subscribed to a URI of its own and one
// shared, has a listen and a task.
type departTables struct {
	levels  logLevels
	subs    subscriptions
	listens localListens
	tasks   taskTable
}

func fillDepartTables(n int) *departTables {
	d := &departTables{levels: newLogLevels("info"), subs: newSubscriptions(nil), tasks: newTaskTable()}
	for i := range n {
		s := uint64(i + 1)
		d.levels.set(s, logNames[i%len(logNames)])
		d.subs.add("file:///own/"+strconv.Itoa(i), s)
		d.subs.add("file:///shared", s)
		d.listens.add(&localListen{session: s, id: json.RawMessage(strconv.Itoa(i)), holder: 1<<32 + s})
		d.tasks.record("task-"+strconv.Itoa(i), taskOwner{session: s, up: int64(i), token: json.RawMessage(`1`)})
	}
	return d
}

// depart is what detach does to these tables for session s.
func (d *departTables) depart(s uint64) (last []string, listens []*localListen, tasks []string) {
	listens = d.listens.drop(s)
	last = d.subs.drop(s)
	tasks = d.tasks.drop(s)
	d.levels.drop(s)
	d.levels.upstream(1 << 30)
	return last, listens, tasks
}

// TestDepartTablesPerSession: a departure takes out exactly its own
// session's entries, and the most verbose level and the shared URI's last
// holder come out right as sessions leave one by one.
func TestDepartTablesPerSession(t *testing.T) {
	const n = 20
	d := fillDepartTables(n)
	for i := range n {
		s := uint64(i + 1)
		last, listens, tasks := d.depart(s)
		want := []string{"file:///own/" + strconv.Itoa(i)}
		if i == n-1 {
			want = append(want, "file:///shared")
		}
		slices.Sort(last)
		assert.Equal(t, want, last, "session %d", s)
		require.Len(t, listens, 1)
		assert.Equal(t, s, listens[0].session)
		assert.Equal(t, []string{"task-" + strconv.Itoa(i)}, tasks)
		if i < n-1 {
			lvl := d.levels.mostVerboseLocked(false)
			wantLvl := logNames[len(logNames)-1]
			for j := i + 1; j < n; j++ {
				if r := j % len(logNames); r < logRanks[wantLvl] {
					wantLvl = logNames[r]
				}
			}
			assert.Equal(t, wantLvl, lvl, "after session %d left", s)
		}
	}
	assert.Empty(t, d.subs.byURI)
	assert.Empty(t, d.subs.bySession)
	assert.Empty(t, d.listens.byKey)
	assert.Empty(t, d.listens.bySession)
	assert.Empty(t, d.tasks.byID)
	assert.Empty(t, d.tasks.bySession)
	assert.Equal(t, [len(logNames)]int{}, d.levels.count)
}

// TestDepartCostFlat: what a departure costs in these tables does not grow
// with the hub's other sessions. Leaving a hub of 10,000 costs within a
// small factor of leaving one of 10 (a walk over every session was about
// a thousand times dearer).
func TestDepartCostFlat(t *testing.T) {
	per := func(n int) time.Duration {
		d := fillDepartTables(n)
		const leave = 10
		var best time.Duration
		for round := range 3 {
			start := time.Now()
			for i := range leave / 3 {
				d.depart(uint64(round*(leave/3) + i + 1))
			}
			if el := time.Since(start); round == 0 || el < best {
				best = el
			}
		}
		return best
	}
	small, large := per(10), per(10_000)
	t.Logf("departure from 10 sessions %v, from 10,000 sessions %v", small, large)
	assert.Less(t, large, 50*small+200*time.Microsecond, fmt.Sprintf("departure cost grows with the hub's sessions: %v against %v", large, small))
}

// TestRegistryCountsUsing: how many sessions want the server is kept as
// sessions come, turn to wanting it, and go, so that the supervisor's look
// at it after each departure is not a walk over every session.
func TestRegistryCountsUsing(t *testing.T) {
	r := newRegistry(nil, 0)
	mk := func(id uint64, using bool) *client {
		c := &client{sess: session.New(session.Config{ID: id}, nil)}
		c.using.Store(using)
		return c
	}
	a, b, late := mk(1, true), mk(2, false), mk(3, false)
	require.True(t, r.add(a))
	require.True(t, r.add(b))
	assert.Equal(t, 1, r.using())
	assert.True(t, r.markUsing(b), "b turns")
	assert.False(t, r.markUsing(b), "b had turned already")
	assert.Equal(t, 2, r.using())
	r.remove(1)
	assert.Equal(t, 1, r.using(), "a went")
	r.remove(1)
	assert.Equal(t, 1, r.using(), "a second remove counts nothing out")
	assert.True(t, r.markUsing(late), "a session not in the registry turns")
	assert.Equal(t, 1, r.using(), "but is not counted")
	r.remove(2)
	assert.Equal(t, 0, r.using())
}

// TestServerReqsDropSession: a departure takes exactly its own requests and
// elicitations, and one with none takes nothing.
func TestServerReqsDropSession(t *testing.T) {
	tab := newServerReqs()
	expire := func(srvKey) {}
	k1 := tab.add(1, &serverReq{up: []byte(`1`)}, time.Hour, expire)
	tab.add(1, &serverReq{up: []byte(`2`)}, time.Hour, expire)
	tab.add(2, &serverReq{up: []byte(`3`)}, time.Hour, expire)
	tab.elicit("e1", 1)
	tab.elicit("e2", 2)
	tab.elicit("moved", 1)
	tab.elicit("moved", 2)
	require.NotNil(t, tab.take(k1))
	assert.Nil(t, tab.dropSession(3), "a session with nothing held")
	gone := tab.dropSession(1)
	require.Len(t, gone, 1)
	assert.Equal(t, `2`, string(gone[0].up))
	_, ok := tab.takeElicitation("e1")
	assert.False(t, ok, "session 1's elicitation went with it")
	s, ok := tab.takeElicitation("moved")
	assert.True(t, ok && s == 2, "an elicitation filed again under session 2 stays")
	assert.Len(t, tab.dropSession(2), 1)
	assert.Empty(t, tab.held)
	assert.Empty(t, tab.pending)
	assert.Empty(t, tab.elicitations)
}
