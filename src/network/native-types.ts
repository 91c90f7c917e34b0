// Private description of the network part of the native addon (filled in by the engine implementation).
export interface NativeNetwork {}
