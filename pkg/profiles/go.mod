module github.com/aptix-dev/aptix/pkg/profiles

go 1.26

require github.com/aptix-dev/aptix/pkg/contracts v0.0.0

replace github.com/aptix-dev/aptix/pkg/contracts => ../contracts
