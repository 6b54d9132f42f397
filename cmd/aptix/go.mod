module github.com/aptix-dev/aptix/cmd/aptix

go 1.26

require github.com/spf13/cobra v1.10.2

require (
	github.com/aptix-dev/aptix/pkg/profiles v0.0.0
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)

replace (
	github.com/aptix-dev/aptix/pkg/contracts => ../../pkg/contracts
	github.com/aptix-dev/aptix/services/envelope => ../../services/envelope
	github.com/aptix-dev/aptix/services/llmcaller => ../../services/llmcaller
	github.com/aptix-dev/aptix/services/mapper => ../../services/mapper
	github.com/aptix-dev/aptix/services/retriever => ../../services/retriever
)

replace github.com/aptix-dev/aptix/pkg/profiles => ../../pkg/profiles
