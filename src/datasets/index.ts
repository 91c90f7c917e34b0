// Public API of the data pipeline: readers, writer, split files, synthetic data, statistics.
export { nnz, sharedFloat32, sharedUint32, isShared, toShared, type SparseDataset } from './csr.js';
export { DataFormatError } from './errors.js';
export { readXC, parseXCHeader, type ReadXCOptions, type XCHeader } from './xc-reader.js';
export { writeXC, formatFloat32, type WriteXCOptions } from './xc-writer.js';
export { readLibsvm, type ReadLibsvmOptions } from './libsvm-reader.js';
export { readSplit, subset, type ReadSplitOptions } from './split-reader.js';
export {
  synthesize, syntheticSplit, generateSynthetic, resolveShape, SHAPES, SHAPE_NAMES, SynthModel,
  type ShapeName, type SynthShape, type SynthesizeOptions, type GenerateSyntheticOptions, type GenerateSyntheticResult,
} from './synth.js';
export {
  synthesizeTaxonomy, generateTaxonomy, resolveTaxonomyShape, TAXONOMY_SHAPES, TAXONOMY_SHAPE_NAMES, TaxonomyModel,
  type TaxonomyShape, type TaxonomyShapeName, type SynthesizeTaxonomyOptions, type GenerateTaxonomyOptions,
} from './taxonomy.js';
export { describe, type DatasetStats, type LabelFrequencySummary } from './stats.js';
export type { StreamOptions } from './line-parser.js';
export { readText, parseTextLine, MAX_TEXT_LINE_BYTES, type ReadTextOptions, type TextData } from './text-reader.js';
