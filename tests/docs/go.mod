module github.com/aptix-dev/aptix/tests/docs

go 1.26.0
