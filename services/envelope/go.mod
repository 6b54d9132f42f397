module github.com/aptix-dev/aptix/services/envelope

go 1.26

require (
	github.com/aptix-dev/aptix/pkg/contracts v0.0.0
	github.com/aptix-dev/aptix/pkg/profiles v0.0.0
)

replace github.com/aptix-dev/aptix/pkg/contracts => ../../pkg/contracts

replace github.com/aptix-dev/aptix/pkg/profiles => ../../pkg/profiles
