// The client's own waits and intervals (leases, verifying, stall checks) are timed on a monotonic
// clock: the wall clock can step (NTP; a test machine stepped 20 s forward in a run), which would
// end a wait early or hold a lease's renewal back for as long as the step. Times that come from
// elsewhere (a message's publish time) are wall-clock times and are compared with Date.now().
export function monotonicMs(): number {
  return performance.now();
}
