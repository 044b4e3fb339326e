package rawio_test

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }
