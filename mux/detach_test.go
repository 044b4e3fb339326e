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
