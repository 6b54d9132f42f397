package pipeline

import (
	"context"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	shutdown, err := SetupTelemetry(context.Background(), "pipeline-test")
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = shutdown(context.Background())
	os.Exit(code)
}
