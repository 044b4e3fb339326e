package protocol

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLegacyRevisions(t *testing.T) {
	assert.True(t, slices.IsSorted(Legacy), "revisions sort in date order")
	assert.Equal(t, LatestLegacy, Legacy[len(Legacy)-1])
	for _, v := range Legacy {
		assert.True(t, IsLegacy(v), v)
	}
	for _, v := range []string{"", "2026-07-28", "2025-11-25 ", "2024-10-07"} {
		assert.False(t, IsLegacy(v), "%q", v)
	}
}

func TestSupportedRevisions(t *testing.T) {
	assert.Equal(t, []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}, Supported)
	assert.True(t, IsModern(Modern))
	assert.False(t, IsModern(LatestLegacy))
}
