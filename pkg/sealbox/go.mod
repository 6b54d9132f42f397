module github.com/aptix-dev/aptix/pkg/sealbox

go 1.26
