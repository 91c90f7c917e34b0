// Dispatches `sublinear <command>`; replaced by the full CLI.
export async function main(argv: string[]): Promise<number> {
  process.stdout.write(`sublinear: no commands yet (${argv.join(' ')})\n`);
  return 0;
}
