module github.com/aptix-dev/aptix/pkg/hostguard

go 1.26
