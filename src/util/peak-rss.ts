// Peak resident memory of this process, as the CLI and the benchmarks report it.

/** Peak resident set size of this process in bytes (getrusage's maxRSS is in KiB). */
export function peakRssBytes(): number {
  return process.resourceUsage().maxRSS * 1024;
}

/** Peak resident set size of this process in MiB, rounded (the `peakRssMB` of JSON reports). */
export function peakRssMB(): number {
  return Math.round(process.resourceUsage().maxRSS / 1024);
}
