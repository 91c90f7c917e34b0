// The --log file of a training job: one JSON line per epoch, then a summary line.
//
// The file is opened at its first record, after fit() has taken the checkpoint directory's lock: a second
// run started by mistake must not truncate the log of the run it collides with. A resumed run rewrites it
// from the records its checkpoint holds (the epochs up to the checkpoint; a killed run may have logged later
// ones, which are trained again), so the log describes the whole run once (`append`: a checkpoint that holds
// no records, whose log is appended to instead). A write that fails (a full disk) is warned about, naming
// the file, and training goes on: the rest of the records are not written (a torn line is cut off) and
// counted (`failures`, the summary's logFailures).
import { open, type FileHandle } from 'node:fs/promises';
import { outputTarget } from '../util/atomic-write.js';
import { fsErrorReason } from '../util/fs-errors.js';

export class TrainLog {
  /** Records that could not be written. */
  failures = 0;
  private file: FileHandle | undefined;
  private bytes = 0;
  private broken = false;

  constructor(
    private readonly path: string,
    /** Records of the epochs before a resumed run's checkpoint, written first. */
    private readonly prior: readonly object[],
    private readonly append: boolean,
    private readonly warn: (message: string) => void,
  ) {}

  async write(record: object): Promise<void> {
    if (this.broken) {
      this.failures++;
      return;
    }
    try {
      if (!this.file) {
        this.file = await open(await outputTarget(this.path), this.append ? 'a' : 'w');
        for (const r of this.prior) await this.line({ type: 'epoch', ...r });
      }
      await this.line(record);
    } catch (e) {
      this.broken = true;
      this.failures++;
      if (this.file) await this.file.truncate(this.bytes).catch(() => {});
      this.warn(`cannot write --log ${this.path}: ${fsErrorReason(e)}. Training goes on; the log stops here ` +
        `(${this.bytes > 0 ? 'it holds the records before this one' : 'it is empty'}; logFailures in the summary counts the records not written)`);
    }
  }

  async close(): Promise<void> {
    await this.file?.close();
  }

  private async line(record: object): Promise<void> {
    const line = Buffer.from(JSON.stringify(record) + '\n');
    let off = 0;
    while (off < line.length) off += (await this.file!.write(line, off, line.length - off)).bytesWritten;
    this.bytes += line.length;
  }
}
