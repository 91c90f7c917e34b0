// The readable part of a file-system error, for messages that name the path themselves
// (`--save m.sl: directory /x does not exist`, `data.txt: no such file or directory`): Node's own
// message repeats the syscall and the path, and says `EACCES` where a user wants "permission denied".

const REASONS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'is a directory',
  ENOTDIR: 'not a directory',
  ENOSPC: 'no space left on device',
  EROFS: 'read-only filesystem',
  ENAMETOOLONG: 'name too long',
};

/** "no such file or directory", "permission denied", ... for a known code; else the error's message. */
export function fsErrorReason(e: unknown): string {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  return (code !== undefined && REASONS[code]) || (e instanceof Error ? e.message : String(e));
}

/** Whether `e` is a file-system error whose code fsErrorReason words. */
export function isKnownFsError(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  return code !== undefined && Object.hasOwn(REASONS, code);
}
