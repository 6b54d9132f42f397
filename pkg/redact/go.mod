module github.com/aptix-dev/aptix/pkg/redact

go 1.26
