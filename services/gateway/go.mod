module github.com/aptix-dev/aptix/services/gateway

go 1.26.0

replace (
	github.com/aptix-dev/aptix/pkg/contracts => ../../pkg/contracts
	github.com/aptix-dev/aptix/pkg/pipeline => ../../pkg/pipeline
	github.com/aptix-dev/aptix/pkg/profiles => ../../pkg/profiles
	github.com/aptix-dev/aptix/pkg/toolemu => ../../pkg/toolemu
	github.com/aptix-dev/aptix/services/envelope => ../envelope
)

require (
	github.com/aptix-dev/aptix/pkg/contracts v0.0.0
	github.com/aptix-dev/aptix/pkg/profiles v0.0.0
	github.com/aptix-dev/aptix/services/envelope v0.0.0
)

require (
	github.com/aptix-dev/aptix/pkg/toolemu v0.0.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	golang.org/x/text v0.43.0 // indirect
)
