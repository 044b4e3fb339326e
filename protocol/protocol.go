// Package protocol names the MCP revisions mcpmux speaks, for the packages
// that must agree on them: the router, which negotiates them, and the HTTP
// transport, which checks the MCP-Protocol-Version header against them.
package protocol

import "slices"

// Legacy are the legacy revisions (an initialize handshake, per-connection
// state), oldest first. Their names sort in date order, so comparing strings
// compares revisions.
var Legacy = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// LatestLegacy is the newest legacy revision; mcpmux asks a legacy server
// for it.
const LatestLegacy = "2025-11-25"

// IsLegacy reports whether v is a legacy revision.
func IsLegacy(v string) bool { return slices.Contains(Legacy, v) }
