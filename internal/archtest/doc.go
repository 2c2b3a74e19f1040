// Package archtest holds the test that keeps docs/architecture.md true:
// its package table, and the "may import" column of each row, are checked
// against the imports that `go list` reports for every package of the
// module. It has no code of its own.
package archtest
