module github.com/aptix-dev/aptix/pkg/netguard

go 1.26
