// Package config owns mcpmux's config file: where it is found (DefaultPath),
// reading it (Load), and turning its TOML into checked, typed values with
// every default filled in (Parse). It enforces the file's contract, written
// in DESIGN.md under "Contracts": the tables [daemon], [listen] and
// [servers.NAME], their keys, their defaults, and the wording of every
// problem, reported as "file:line: dotted.key: what", all of a file's
// problems at once, in line order. It reads files and the environment (that
// is its job) but never writes, and starts nothing.
package config
