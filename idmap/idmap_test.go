package idmap_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/idmap"
	"github.com/mcpmux/mcpmux/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func route(session uint64, id string) idmap.Route {
	return idmap.Route{Session: session, ID: json.RawMessage(id)}
}

func TestTableRoundTripsIDsVerbatim(t *testing.T) {
	tests := []struct {
		name   string
		routes []idmap.Route // one request per entry
	}{
		{"same id from two sessions", []idmap.Route{route(1, `1`), route(2, `1`)}},
		{"string and number kept apart", []idmap.Route{route(1, `"1"`), route(1, `1`)}},
		{"negative and zero", []idmap.Route{route(1, `-7`), route(1, `0`)}},
		{"beyond float64 precision", []idmap.Route{route(1, `18446744073709551617`), route(1, `18446744073709551616`)}},
		{"beyond int64", []idmap.Route{route(1, `-99999999999999999999999999999999`)}},
		{"escapes kept as sent", []idmap.Route{route(1, `"a\u0062"`), route(1, `"ab"`), route(1, `"\"\\/"`)}},
		{"unicode", []idmap.Route{route(1, `"ключ-🔑"`)}},
		{"mcpmux's own session 0", []idmap.Route{route(0, `1`), route(0, `2`)}},
		{"everything else carried untouched", []idmap.Route{{
			Session: 9, ID: json.RawMessage(`"x"`), Method: "tools/call",
			Token: json.RawMessage(`"tok-1"`), Started: time.Unix(1700000000, 5), Data: map[string]int{"n": 1},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tab idmap.Table
			up := make([]int64, len(tt.routes))
			for i, r := range tt.routes {
				var err error
				up[i], err = tab.Add(r)
				require.NoError(t, err, "Add(%d, %s)", r.Session, r.ID)
			}
			assert.Equal(t, len(tt.routes), tab.Len())
			for i, r := range tt.routes {
				got, ok := tab.Get(up[i])
				require.True(t, ok, "Get(%d) for %s", up[i], r.ID)
				assert.Equal(t, r, got, "Get(%d)", up[i])
				got, ok = tab.Take(up[i])
				require.True(t, ok, "Take(%d) for %s", up[i], r.ID)
				assert.Equal(t, r, got, "Take(%d)", up[i])
			}
			assert.Equal(t, 0, tab.Len())
		})
	}
}

func TestAddRefusesDuplicates(t *testing.T) {
	tests := []struct {
		name    string
		first   idmap.Route
		settle  func(tab *idmap.Table, up int64) // nil: still in flight
		second  idmap.Route
		wantErr error
	}{
		{"same session and id in flight", route(1, `7`), nil, route(1, `7`), idmap.ErrDuplicate},
		{"same string id in flight", route(1, `"a"`), nil, route(1, `"a"`), idmap.ErrDuplicate},
		{"same id, other method, in flight", idmap.Route{Session: 1, ID: json.RawMessage(`7`), Method: "a"}, nil, idmap.Route{Session: 1, ID: json.RawMessage(`7`), Method: "b"}, idmap.ErrDuplicate},
		{"after Take", route(1, `7`), func(tab *idmap.Table, up int64) { tab.Take(up) }, route(1, `7`), nil},
		{"after Cancel", route(1, `7`), func(tab *idmap.Table, _ int64) { tab.Cancel(1, json.RawMessage(`7`)) }, route(1, `7`), nil},
		{"after DropSession", route(1, `7`), func(tab *idmap.Table, _ int64) { tab.DropSession(1) }, route(1, `7`), nil},
		{"after Reset", route(1, `7`), func(tab *idmap.Table, _ int64) { tab.Reset() }, route(1, `7`), nil},
		{"Get does not settle", route(1, `7`), func(tab *idmap.Table, up int64) { tab.Get(up) }, route(1, `7`), idmap.ErrDuplicate},
		{"other session", route(1, `7`), nil, route(2, `7`), nil},
		{"1 and \"1\"", route(1, `1`), nil, route(1, `"1"`), nil},
		{"1 and 1.0 are different bytes", route(1, `1`), nil, route(1, `1.0`), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tab idmap.Table
			up1, err := tab.Add(tt.first)
			require.NoError(t, err, "first Add")
			if tt.settle != nil {
				tt.settle(&tab, up1)
			}
			up2, err := tab.Add(tt.second)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr, "second Add(%d, %s)", tt.second.Session, tt.second.ID)
				assert.Zero(t, up2, "upstream id with an error")
				// The refusal used no id and changed nothing.
				got, ok := tab.Get(up1)
				assert.True(t, ok, "the first request is still in flight")
				assert.Equal(t, tt.first, got)
				up3, err := tab.Add(route(99, `1`))
				require.NoError(t, err)
				assert.Equal(t, up1+1, up3, "a refused Add consumes no id")
				return
			}
			require.NoError(t, err, "second Add(%d, %s)", tt.second.Session, tt.second.ID)
			assert.Greater(t, up2, up1, "ids only grow")
		})
	}
}

func TestTakeAndGetOfUnknownIDs(t *testing.T) {
	var tab idmap.Table
	tests := []int64{0, -1, 1, 2, 1 << 62}
	for _, up := range tests { // zero Table: no maps yet
		r, ok := tab.Take(up)
		assert.False(t, ok, "Take(%d) on an empty table", up)
		assert.Equal(t, idmap.Route{}, r, "Take(%d) on an empty table", up)
		_, ok = tab.Get(up)
		assert.False(t, ok, "Get(%d) on an empty table", up)
	}
	up, err := tab.Add(route(1, `1`))
	require.NoError(t, err)
	_, ok := tab.Take(up + 1)
	assert.False(t, ok, "Take of an id not handed out yet")
	r, ok := tab.Take(up)
	assert.True(t, ok)
	assert.Equal(t, route(1, `1`), r)
	r, ok = tab.Take(up)
	assert.False(t, ok, "Take of an id already taken: a late answer")
	assert.Equal(t, idmap.Route{}, r)
}

func TestCancelFindsOnlyTheSessionsOwnRequest(t *testing.T) {
	var tab idmap.Table
	upA, err := tab.Add(route(1, `5`)) // session A = 1 sends id 5
	require.NoError(t, err)
	upB, err := tab.Add(route(2, `"b"`)) // session B = 2 has its own request
	require.NoError(t, err)
	upAsID := json.RawMessage(fmt.Sprint(upA))

	tests := []struct {
		name    string
		session uint64
		id      json.RawMessage
	}{
		{"B by A's id", 2, json.RawMessage(`5`)},
		{"B by A's upstream id", 2, upAsID},
		{"A by B's id", 1, json.RawMessage(`"b"`)},
		{"A by its id with other bytes", 1, json.RawMessage(`"5"`)},
		{"A by its upstream id", 1, upAsID},
		{"mcpmux by A's id", 0, json.RawMessage(`5`)},
		{"unknown session", 3, json.RawMessage(`5`)},
		{"nil id", 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, r, ok := tab.Cancel(tt.session, tt.id)
			assert.False(t, ok, "Cancel(%d, %s)", tt.session, tt.id)
			assert.Zero(t, up)
			assert.Equal(t, idmap.Route{}, r)
			assert.Equal(t, 2, tab.Len(), "nothing removed")
		})
	}

	up, r, ok := tab.Cancel(1, json.RawMessage(`5`))
	assert.True(t, ok, "A cancels its own request")
	assert.Equal(t, upA, up)
	assert.Equal(t, route(1, `5`), r)
	_, _, ok = tab.Cancel(1, json.RawMessage(`5`))
	assert.False(t, ok, "a second cancel finds nothing")
	_, ok = tab.Take(upA)
	assert.False(t, ok, "the answer after a cancel is late")
	r, ok = tab.Take(upB)
	assert.True(t, ok, "B's request untouched")
	assert.Equal(t, route(2, `"b"`), r)
}

func TestDropSessionReturnsExactlyItsRoutes(t *testing.T) {
	var tab idmap.Table
	want := map[uint64]map[int64]idmap.Route{}
	for i := range 30 {
		r := route(uint64(i%3+1), fmt.Sprint(i))
		up, err := tab.Add(r)
		require.NoError(t, err)
		if want[r.Session] == nil {
			want[r.Session] = map[int64]idmap.Route{}
		}
		want[r.Session][up] = r
	}
	// One of session 2's requests is already answered.
	for up := range want[2] {
		tab.Take(up)
		delete(want[2], up)
		break
	}

	assert.Equal(t, want[2], tab.DropSession(2), "DropSession(2)")
	assert.Equal(t, 20, tab.Len(), "sessions 1 and 3 remain")
	assert.Empty(t, tab.DropSession(2), "DropSession(2) again")
	assert.Empty(t, tab.DropSession(4), "DropSession of a session with nothing in flight")
	var zero idmap.Table
	assert.Empty(t, zero.DropSession(1), "DropSession on a zero Table")

	for up, r := range want[1] {
		got, ok := tab.Take(up)
		assert.True(t, ok, "session 1's %s", r.ID)
		assert.Equal(t, r, got)
	}
	assert.Equal(t, want[3], tab.DropSession(3), "DropSession(3)")
	assert.Equal(t, 0, tab.Len())
	_, err := tab.Add(route(2, `0`))
	assert.NoError(t, err, "a dropped session's id may be used again")
}

func TestResetReturnsAllAndKeepsCounting(t *testing.T) {
	var tab idmap.Table
	assert.Empty(t, tab.Reset(), "Reset of a zero Table")
	want := map[int64]idmap.Route{}
	var last int64
	for i := range 10 {
		r := route(uint64(i%2), fmt.Sprint(i))
		up, err := tab.Add(r)
		require.NoError(t, err)
		want[up], last = r, up
	}
	assert.Equal(t, want, tab.Reset())
	assert.Equal(t, 0, tab.Len())
	for up := range want {
		_, ok := tab.Take(up)
		assert.False(t, ok, "Take(%d) after Reset", up)
	}
	up, err := tab.Add(route(0, `0`))
	require.NoError(t, err, "the same (session, id) after Reset")
	assert.Equal(t, last+1, up, "the counter goes on across Reset")
	assert.Equal(t, map[int64]idmap.Route{up: route(0, `0`)}, tab.Reset())
}

func TestIDsAreNeverReused(t *testing.T) {
	var tab idmap.Table
	var prev int64
	for i := range 10000 {
		up, err := tab.Add(route(1, `1`))
		require.NoError(t, err, "cycle %d", i)
		require.Greater(t, up, prev, "cycle %d", i)
		prev = up
		switch i % 4 {
		case 0:
			_, ok := tab.Take(up)
			require.True(t, ok, "cycle %d", i)
		case 1:
			_, _, ok := tab.Cancel(1, json.RawMessage(`1`))
			require.True(t, ok, "cycle %d", i)
		case 2:
			require.Len(t, tab.DropSession(1), 1, "cycle %d", i)
		case 3:
			require.Len(t, tab.Reset(), 1, "cycle %d", i)
		}
	}
	assert.Equal(t, int64(10000), prev)
}

func TestLatest(t *testing.T) {
	base := time.Unix(1700000000, 0)
	at := func(session uint64, id string, sec int, method string) idmap.Route {
		return idmap.Route{Session: session, ID: json.RawMessage(id), Method: method, Started: base.Add(time.Duration(sec) * time.Second)}
	}
	all := func(idmap.Route) bool { return true }
	tests := []struct {
		name   string
		routes []idmap.Route
		keep   func(idmap.Route) bool
		want   uint64
		wantOK bool
	}{
		{"empty", nil, all, 0, false},
		{"only mcpmux's own", []idmap.Route{at(0, `1`, 9, "ping")}, all, 0, false},
		{"latest start wins", []idmap.Route{at(1, `1`, 1, "a"), at(2, `1`, 3, "a"), at(3, `1`, 2, "a")}, all, 2, true},
		{"mcpmux's own is skipped though latest", []idmap.Route{at(1, `1`, 1, "a"), at(0, `1`, 5, "a")}, all, 1, true},
		{"keep filters", []idmap.Route{at(1, `1`, 1, "tools/call"), at(2, `1`, 3, "ping")},
			func(r idmap.Route) bool { return r.Method == "tools/call" }, 1, true},
		{"keep refuses all", []idmap.Route{at(1, `1`, 1, "a")}, func(idmap.Route) bool { return false }, 0, false},
		{"zero start time still counts", []idmap.Route{{Session: 4, ID: json.RawMessage(`1`)}}, all, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tab idmap.Table
			for _, r := range tt.routes {
				_, err := tab.Add(r)
				require.NoError(t, err)
			}
			_, r, ok := tab.LatestRoute(tt.keep)
			assert.Equal(t, tt.wantOK, ok, "ok")
			assert.Equal(t, tt.want, r.Session, "session")
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	const sessions, each = 16, 500
	var tab idmap.Table
	ids := make([][]int64, sessions) // every upstream id each goroutine was given
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := range sessions {
		wg.Go(func() {
			sess := uint64(s + 1)
			for i := range each {
				id := json.RawMessage(fmt.Sprint(i % 7))
				up, err := tab.Add(idmap.Route{Session: sess, ID: id})
				if err != nil {
					errs <- fmt.Errorf("session %d: Add(%s): %w", sess, id, err)
					return
				}
				ids[s] = append(ids[s], up)
				if r, ok := tab.Get(up); !ok || r.Session != sess {
					errs <- fmt.Errorf("session %d: Get(%d) = %v, %v", sess, up, r, ok)
					return
				}
				var ok bool
				if i%2 == 0 {
					_, ok = tab.Take(up)
				} else {
					_, _, ok = tab.Cancel(sess, id)
				}
				if !ok {
					errs <- fmt.Errorf("session %d: request %d (up %d) vanished", sess, i, up)
					return
				}
			}
		})
	}
	// Readers and a session that comes and goes, all at once.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			tab.Len()
			tab.LatestRoute(func(idmap.Route) bool { return true })
			tab.DropSession(sessions + 1)
			tab.Add(route(sessions+1, `1`))
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}

	seen := map[int64]bool{}
	for s, list := range ids {
		assert.Len(t, list, each, "session %d", s+1)
		for i, up := range list {
			assert.False(t, seen[up], "upstream id %d handed out twice", up)
			seen[up] = true
			if i > 0 {
				assert.Greater(t, up, list[i-1], "session %d's ids grow", s+1)
			}
		}
	}
	tab.DropSession(sessions + 1)
	assert.Equal(t, 0, tab.Len(), "everything settled")
}

func TestMoveWithinItsSessionChangesItsID(t *testing.T) {
	var tab idmap.Table
	up, err := tab.Add(idmap.Route{Session: 1, ID: json.RawMessage(`"a"`)})
	require.NoError(t, err)
	other, err := tab.Add(idmap.Route{Session: 1, ID: json.RawMessage(`"b"`)})
	require.NoError(t, err)

	found, err := tab.Move(up, 1, json.RawMessage(`"b"`), nil, 0)
	assert.True(t, found)
	assert.ErrorIs(t, err, idmap.ErrDuplicate, "b is in flight")

	found, err = tab.Move(up, 1, json.RawMessage(`"c"`), json.RawMessage(`"tok"`), 9)
	require.NoError(t, err)
	assert.True(t, found)
	r, _ := tab.Get(up)
	assert.Equal(t, idmap.Route{Session: 1, ID: json.RawMessage(`"c"`), Token: json.RawMessage(`"tok"`), Tag: 9}, r)
	_, err = tab.Add(idmap.Route{Session: 1, ID: json.RawMessage(`"a"`)})
	assert.NoError(t, err, "a is free once its request moved to c")
	got, _, ok := tab.Cancel(1, json.RawMessage(`"c"`))
	assert.True(t, ok)
	assert.Equal(t, up, got)

	found, err = tab.Move(999, 1, json.RawMessage(`"d"`), nil, 0)
	assert.False(t, found)
	assert.NoError(t, err)
	_, ok = tab.Take(other)
	assert.True(t, ok)
}

func TestLatestRouteNamesTheRequest(t *testing.T) {
	var tab idmap.Table
	t0 := time.Now()
	a, _ := tab.Add(idmap.Route{Session: 1, ID: json.RawMessage(`1`), Method: "tools/call", Started: t0})
	b, _ := tab.Add(idmap.Route{Session: 2, ID: json.RawMessage(`1`), Method: "tools/list", Started: t0.Add(time.Second)})
	up, r, ok := tab.LatestRoute(func(idmap.Route) bool { return true })
	assert.True(t, ok)
	assert.Equal(t, b, up)
	assert.Equal(t, uint64(2), r.Session)
	up, _, ok = tab.LatestRoute(func(r idmap.Route) bool { return r.Method == "tools/call" })
	assert.True(t, ok)
	assert.Equal(t, a, up)
	_, _, ok = tab.LatestRoute(func(idmap.Route) bool { return false })
	assert.False(t, ok)
}

// TestDropSessionAfterMovesAndCancels: the per-session count that lets
// DropSession stop early follows a request through Cancel and Move.
func TestDropSessionAfterMovesAndCancels(t *testing.T) {
	var tab idmap.Table
	a1, err := tab.Add(route(1, `1`))
	require.NoError(t, err)
	_, err = tab.Add(route(1, `2`))
	require.NoError(t, err)
	_, err = tab.Add(route(2, `1`))
	require.NoError(t, err)
	_, _, ok := tab.Cancel(1, json.RawMessage(`2`))
	require.True(t, ok)
	found, err := tab.Move(a1, 3, json.RawMessage(`9`), nil, 0)
	require.True(t, found)
	require.NoError(t, err)
	assert.Empty(t, tab.DropSession(1), "session 1's requests were cancelled or moved")
	got := tab.DropSession(3)
	require.Len(t, got, 1, "the moved request is session 3's")
	assert.Equal(t, `9`, string(got[a1].ID))
	assert.Len(t, tab.DropSession(2), 1)
	assert.Equal(t, 0, tab.Len())
}

// TestDropSessionOfIdleSessionIsFlat: a session with nothing in flight
// departs without a walk over the other sessions' requests.
func TestDropSessionOfIdleSessionIsFlat(t *testing.T) {
	cost := func(others int) time.Duration {
		var tab idmap.Table
		for i := range others {
			_, err := tab.Add(route(uint64(i+1), `1`))
			require.NoError(t, err)
		}
		best := time.Duration(1 << 62)
		for range 5 {
			start := time.Now()
			for s := range 100 {
				assert.Nil(t, tab.DropSession(uint64(others+1+s)))
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := cost(10), cost(10_000)
	t.Logf("100 idle departures beside 10 requests in flight %v, beside 10,000 %v", small, large)
	assert.Less(t, large, 20*small+100*time.Microsecond)
}
