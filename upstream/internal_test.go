package upstream

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestChildEnv(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		inherit []string
		env     map[string]string
		want    []string
	}{
		{"nothing", nil, nil, nil, []string{}},
		{"allowlist only", []string{"HOME=/h", "AWS_SECRET_ACCESS_KEY=x", "PATH=/bin", "TERM=dumb", "SSH_AUTH_SOCK=/s"}, nil, nil,
			[]string{"HOME=/h", "PATH=/bin", "TERM=dumb"}},
		{"inherit adds names", []string{"LANG=C", "HTTPS_PROXY=http://p", "OTHER=1"}, []string{"LANG", "HTTPS_PROXY"}, nil,
			[]string{"HTTPS_PROXY=http://p", "LANG=C"}},
		{"shell functions dropped", []string{"SHELL=() { :; }", "USER=u", "F=() {", "G=x()"}, []string{"F", "G"}, nil,
			[]string{"G=x()", "USER=u"}},
		{"last occurrence wins", []string{"USER=a", "USER=b"}, nil, nil, []string{"USER=b"}},
		{"a later function shadows", []string{"USER=a", "USER=() { :; }"}, nil, nil, []string{}},
		{"env wins and adds", []string{"HOME=/h", "USER=u"}, nil, map[string]string{"HOME": "/other", "X": "() ok here"},
			[]string{"HOME=/other", "USER=u", "X=() ok here"}},
		{"empty value kept", []string{"TERM="}, nil, nil, []string{"TERM="}},
		{"malformed entry skipped", []string{"HOME", "=x", "PATH=/bin"}, nil, nil, []string{"PATH=/bin"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, childEnv(tt.environ, tt.inherit, tt.env))
		})
	}
}

func TestRing(t *testing.T) {
	r := newRing(3)
	assert.Equal(t, []string{}, r.lines())
	r.add("a")
	r.add("b")
	assert.Equal(t, []string{"a", "b"}, r.lines())
	r.add("c")
	r.add("d")
	r.add("e")
	assert.Equal(t, []string{"c", "d", "e"}, r.lines())
}

func TestPreview(t *testing.T) {
	assert.Equal(t, "short", preview([]byte("short")))
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a'
	}
	assert.Equal(t, string(long[:200])+"…", preview(long))
	assert.Equal(t, "bad \uFFFD byte", preview([]byte("bad \xff byte")))
}

func TestConfigDefaults(t *testing.T) {
	c := Config{Command: "x"}.withDefaults()
	c.Logger = nil
	assert.Equal(t, Config{
		Command:         "x",
		StderrTailLines: DefaultStderrTailLines,
		StdinGrace:      DefaultStdinGrace,
		TermGrace:       DefaultTermGrace,
		MaxMessageBytes: DefaultMaxMessageBytes,
		MaxJunkLines:    DefaultMaxJunkLines,
		BannerBytes:     DefaultBannerBytes,
		WriteQueueBytes: 2 * DefaultMaxMessageBytes,

		WriteStallTimeout: DefaultWriteStallTimeout,
	}, c)

	c = Config{Command: "x", MaxJunkLines: -1, BannerBytes: -1, MaxMessageBytes: 100, WriteStallTimeout: None}.withDefaults()
	assert.Equal(t, 0, c.MaxJunkLines, "negative tolerates none")
	assert.Equal(t, 0, c.BannerBytes, "negative tolerates none")
	assert.Equal(t, time.Duration(0), c.WriteStallTimeout, "None turns the check off")
	assert.Equal(t, 200, c.WriteQueueBytes)
}
