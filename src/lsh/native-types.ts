// Private description of the LSH part of the native addon (filled in by the LSH implementation).
export interface NativeLsh {}
