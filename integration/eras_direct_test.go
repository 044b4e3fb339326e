package integration

// The era tier, direct: every probe client against every probe server with
// nothing between them but the server's tap, which is the reference the
// through-mcpmux runs are held to. See eras_helpers_test.go for the harness
// and eras_wire_test.go for how a cell is judged.

import (
	"testing"
)

// TestEraDirect runs the direct matrix: the TypeScript SDK v2 client in its
// three modes and the go-sdk client, each against the legacy-only, the two
// dual and the modern-only probe server, and asserts each cell's outcome
// (eraWantDirect), judged from the wire of both ends.
func TestEraDirect(t *testing.T) {
	t.Parallel()
	e := needEras(t)
	direct := eraReach{kind: eraDirect}
	for _, s := range eraServers {
		for _, c := range eraClients {
			want := eraWantDirect(c, s)
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				t.Parallel()
				cell := runEraCell(t, e, c, s, direct)
				eraLogCell(t, cell)
				eraAssertCell(t, cell, want, true)
			})
		}
	}
}

// eraLogCell logs one line about a cell: what the client ended in, its
// checks, and the era of each hop on both ends.
func eraLogCell(t *testing.T, cell *eraCell) {
	t.Helper()
	t.Log(eraSummary(cell))
}
