// Command gen writes the JSON Schema files of package schema. Run it with
// `go generate ./...` from pkg/contracts after changing a contract type.
package main

import (
	"log"
	"os"
	"path/filepath"

	"github.com/aptix-dev/aptix/pkg/contracts/schema"
)

func main() {
	for name, v := range schema.Files {
		b, err := schema.Generate(v)
		if err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(".", name), b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
