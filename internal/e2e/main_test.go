package e2e

import (
	"os"
	"testing"

	"github.com/seckill/seckill/internal/testsupport"
)

// TestMain removes the programs the tests built (each once per run).
func TestMain(m *testing.M) {
	code := m.Run()
	testsupport.RemoveBuilds()
	os.Exit(code)
}
