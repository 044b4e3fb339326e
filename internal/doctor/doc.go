// Package doctor runs the checks of `mcpmux doctor` and returns what they
// find as data: one Finding (a mark and a line) for each thing worth
// saying about a config file, its socket folder, the daemon serving it, the
// daemon's servers, other daemons of the same user, and (through
// internal/editors) the editors' files that run mcpmux connect. It changes
// nothing; the caller prints the Report.
package doctor
