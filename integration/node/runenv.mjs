// runEnv is what a test client adds to the stripped environment it gives
// `mcpmux connect` (as editors do: the SDKs' getDefaultEnvironment): the
// test run's state folder, so that a daemon connect starts keeps its
// records there and not in the account's, and scripts/test's mark, by
// which it finds what the run left running.
export function runEnv() {
  const env = {};
  for (const k of ["XDG_STATE_HOME", "MCPMUX_TEST_RUN"]) {
    if (process.env[k]) env[k] = process.env[k];
  }
  return env;
}
