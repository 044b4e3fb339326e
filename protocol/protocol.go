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

// Modern is the modern revision (2026-07-28): no handshake, a _meta
// envelope on every request, subscriptions/listen, and input_required
// results instead of requests from the server.
const Modern = "2026-07-28"

// IsModern reports whether v is a modern revision mcpmux speaks.
func IsModern(v string) bool { return v == Modern }

// Supported is every revision mcpmux serves to a client, newest first: the
// modern one natively, the legacy ones through the bridge where the server
// speaks the other era.
var Supported = append([]string{Modern}, reversed(Legacy)...)

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// Keys of the modern _meta envelope.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// Error codes of the modern revision.
const (
	CodeHeaderMismatch        = -32020
	CodeMissingCapability     = -32021
	CodeUnsupportedVersion    = -32022
	CodeLegacyResourceMissing = -32002 // retired: a modern peer gets -32602
)
