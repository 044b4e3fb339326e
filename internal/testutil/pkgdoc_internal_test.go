package testutil

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDocNamesPackage(t *testing.T) {
	tests := []struct {
		text, name string
		want       bool
	}{
		{"Package session is one connection.\n", "session", true},
		{"Package session\n", "session", true},
		{"Package sessions are fun.\n", "session", false},
		{"package session is lower case.\n", "session", false},
		{"Session is one connection.\n", "session", false},
		{"Command mcpmux runs servers.\n", "main", true},
		{"Package main runs servers.\n", "main", true},
		{"Mcpmux runs servers.\n", "main", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, docNamesPackage(tt.text, tt.name), "docNamesPackage(%q, %q)", tt.text, tt.name)
	}
}
