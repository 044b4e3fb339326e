package jsonrpc_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

func TestObjectMembers(t *testing.T) {
	m, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"x\u0041","n":3,"o":{}}}`))
	require.NoError(t, err)
	s, ok := m.ParamsString("a")
	assert.Equal(t, "xA", s, "ParamsString of a string")
	assert.True(t, ok)
	_, ok = m.ParamsString("n")
	assert.False(t, ok, "ParamsString of a number")
	assert.Equal(t, json.RawMessage(`3`), jsonrpc.Member(m.Params, "n"), "Member")
	assert.Nil(t, jsonrpc.Member(m.Params, "z"), "Member of an absent name")
	v, ok := jsonrpc.StringMember(m.Params, "a")
	assert.Equal(t, "xA", v, "StringMember")
	assert.True(t, ok)
	assert.True(t, jsonrpc.EmptyObject(jsonrpc.Member(m.Params, "o")), "EmptyObject of {}")
	assert.Equal(t, `{"a":1,"b":"2"}`, string(jsonrpc.ObjectOf(map[string]json.RawMessage{"b": json.RawMessage(`"2"`), "a": json.RawMessage(`1`), "c": nil}, func(k string) bool { return k == "c" })), "ObjectOf sorts and leaves out what have reports")
	ps := jsonrpc.SpanOf(m.Frame, m.Params)
	assert.Equal(t, string(m.Params), string(m.Frame[ps.Start:ps.End]), "SpanOf")
	add := map[string]json.RawMessage{"k": json.RawMessage(`true`)}
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"method":"m","params":{"k":true,"a":"x\u0041","n":3,"o":{}}}`, string(jsonrpc.Splice(m.Frame, jsonrpc.InsertMembers(m.Frame, ps, add, nil))), "InsertMembers into a non-empty object")
	os, _ := m.ParamsPath("o")
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"x\u0041","n":3,"o":{"k":true}}}`, string(jsonrpc.Splice(m.Frame, jsonrpc.InsertMembers(m.Frame, os, add, nil))), "InsertMembers into an empty object")
}
