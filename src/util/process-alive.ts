// Whether a process id is alive on this host (for stale temporary files and lock files).

/** True if a process with id `pid` exists on this machine (signal 0 probes without signalling). */
export function isProcessAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by someone else
  }
}
