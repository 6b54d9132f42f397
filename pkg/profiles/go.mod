module github.com/aptix-dev/aptix/pkg/profiles

go 1.26
